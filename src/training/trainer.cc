#include "tandem/training/trainer.h"

#include <chrono>

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "model.h"
#include "tandem/common/error.h"

namespace tandem::training {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

torch::ScalarType scalar_type(data::DType dtype) {
  switch (dtype) {
    case data::DType::kFloat32: return torch::kFloat32;
    case data::DType::kBFloat16: return torch::kBFloat16;
    case data::DType::kFloat16: return torch::kFloat16;
    case data::DType::kUInt8: return torch::kUInt8;
  }
  return torch::kFloat32;
}

void check_batch(const data::Batch& batch, const data::DatasetInfo& info) {
  const std::vector<int64_t> expected_tail = info.sample_shape;
  if (batch.shape.size() != expected_tail.size() + 1 ||
      !std::equal(expected_tail.begin(), expected_tail.end(), batch.shape.begin() + 1)) {
    throw NetworkError("batch " + std::to_string(batch.sequence) + " has the wrong sample shape for dataset '" +
                       info.name + "': give every host the same data settings");
  }
}

// The batch's bytes as tensors on `device`. The payload is wrapped, not copied, on CPU.
std::pair<torch::Tensor, torch::Tensor> to_tensors(data::Batch& batch, const torch::Device& device) {
  torch::Tensor x = torch::from_blob(batch.data.data(), batch.shape, torch::TensorOptions(scalar_type(batch.dtype)));
  torch::Tensor y = torch::from_blob(batch.labels.data(), {static_cast<int64_t>(batch.labels.size())}, torch::kInt64);
  // Narrow wire dtypes travel to the device as they are and widen there.
  if (device.is_cuda()) {
    x = x.to(device);
    y = y.to(device);
  }
  if (batch.dtype == data::DType::kUInt8) x = x.to(torch::kFloat32).div_(255.0f);
  else if (x.scalar_type() != torch::kFloat32) x = x.to(torch::kFloat32);
  return {x, y};
}

}  // namespace

int cuda_device_count() { return torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0; }

void set_torch_threads(int threads) { torch::set_num_threads(std::max(threads, 1)); }

TrainReport train(const TrainerOptions& opts, const data::DatasetInfo& info, const NextBatch& next,
                  const std::atomic<bool>& stop) {
  const torch::Device device = cuda_device_count() > 0 ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  torch::manual_seed(0);
  at::globalContext().setFlushDenormal(true);  // near-zero gradients late in training are slow otherwise
  torch::nn::AnyModule model = make_model(opts.model, info);
  model.ptr()->to(device);
  torch::optim::SGD optimizer(model.ptr()->parameters(), torch::optim::SGDOptions(opts.lr).momentum(opts.momentum));

  TrainReport report;
  report.device = device.str();
  report.model = opts.model;
  report.torch_threads = torch::get_num_threads();
  const auto start = Clock::now();
  auto window_start = start;
  double window_wait = 0;
  int64_t window_samples = 0;
  while (report.steps < opts.steps && !stop) {
    const auto wait_start = Clock::now();
    std::optional<data::Batch> batch = next();
    const double waited = seconds_since(wait_start);
    report.data_wait_seconds += waited;
    window_wait += waited;
    if (!batch) break;
    check_batch(*batch, info);
    auto [x, y] = to_tensors(*batch, device);
    optimizer.zero_grad();
    torch::Tensor loss = torch::nn::functional::cross_entropy(model.forward(x), y);
    loss.backward();
    optimizer.step();
    const double loss_value = loss.item<double>();
    if (report.steps == 0) report.first_loss = loss_value;
    report.final_loss = loss_value;
    ++report.steps;
    report.samples += batch->size();
    window_samples += batch->size();
    if (report.steps % opts.log_every == 0 || report.steps == opts.steps) {
      const double window = seconds_since(window_start);
      spdlog::info("step={} loss={:.4f} samples_per_sec={:.1f} data_wait_pct={:.1f}", report.steps, loss_value,
                   window_samples / window, 100.0 * window_wait / window);
      window_start = Clock::now();
      window_wait = 0;
      window_samples = 0;
    }
  }
  report.interrupted = stop && report.steps < opts.steps;
  report.wall_seconds = seconds_since(start);
  report.samples_per_sec = report.wall_seconds > 0 ? report.samples / report.wall_seconds : 0;
  report.data_wait_fraction = report.wall_seconds > 0 ? report.data_wait_seconds / report.wall_seconds : 0;
  return report;
}

}  // namespace tandem::training
