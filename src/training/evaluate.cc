#include "evaluate.h"

#include <torch/torch.h>

#include "autocast.h"
#include "tandem/data/batching/batch_maker.h"

namespace tandem::training {

EvalCounts evaluate_shard(Model& model, const std::shared_ptr<const data::Dataset>& eval, int rank, int world,
                          torch::Device device, const InputFormat& format,
                          const std::function<void(int64_t done, int64_t total)>& progress) {
  constexpr size_t kBatch = 256;
  torch::NoGradGuard no_grad;
  model.train(false);
  const data::BatchMaker maker(eval, nullptr, eval->info().dtype);
  const uint64_t n = eval->info().size;
  uint64_t index = static_cast<uint64_t>(rank);
  uint64_t sequence = 0;
  DeviceFeed feed(
      [&]() -> std::optional<data::Batch> {
        if (index >= n) return std::nullopt;
        data::BatchRequest req{sequence++, 0, {}};
        for (; index < n && req.indices.size() < kBatch; index += static_cast<uint64_t>(world)) req.indices.push_back(index);
        return maker.make(req);
      },
      eval->info(), device, format);
  torch::Tensor correct = torch::zeros({}, torch::TensorOptions(torch::kInt64).device(device));
  int64_t samples = 0;
  Autocast amp(format.dtype == torch::kBFloat16, device.is_cuda());
  feed.prefetch();
  while (std::optional<DeviceBatch> b = feed.take()) {
    feed.prefetch();
    correct += model.forward(b->x).argmax(1).eq(b->y).sum();
    samples += b->size;
    if (progress) progress(samples, static_cast<int64_t>((n - static_cast<uint64_t>(rank) + world - 1) / world));
  }
  model.train(true);
  return {correct.item<int64_t>(), samples};
}

}  // namespace tandem::training
