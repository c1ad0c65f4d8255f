#include "device_feed.h"

#include "tandem/common/clock.h"

#include <atomic>
#include <chrono>

#include <torch/torch.h>

#include "tandem/common/error.h"
#include "tandem/data/core/buffer.h"

#if defined(TANDEM_WITH_CUDA)
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/PinnedMemoryAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace tandem::training {
namespace {

#if defined(TANDEM_WITH_CUDA)
std::atomic<int> g_pinned_device{0};

// Runs on gRPC's and the local sources' threads: without the guard the allocator's CUDA
// calls would make a context on GPU 0 in every rank's process.
data::BufferBlock pinned_block(size_t size) {
  const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(g_pinned_device.load()));
  at::DataPtr p = at::cuda::getPinnedMemoryAllocator()->allocate(size);
  auto* data = static_cast<std::byte*>(p.get());
  const c10::DeleterFnPtr deleter = p.get_deleter();
  void* context = p.release_context();
  return {data, context, deleter};
}
#endif

}  // namespace

void install_pinned_buffers(torch::Device device) {
#if defined(TANDEM_WITH_CUDA)
  g_pinned_device = device.index();
  data::set_buffer_allocator(&pinned_block);
#else
  (void)device;
#endif
}

torch::Tensor to_input(const torch::Tensor& x, const torch::Tensor& scale, const torch::Tensor& bias,
                       torch::ScalarType dtype, bool channels_last) {
  const auto format = channels_last && x.dim() == 4 ? torch::MemoryFormat::ChannelsLast : torch::MemoryFormat::Contiguous;
  if (!scale.defined() && x.scalar_type() == dtype && x.is_contiguous(format)) return x;
  torch::Tensor out = torch::empty(x.sizes(), x.options().dtype(dtype).memory_format(format));
  if (!scale.defined()) return out.copy_(x);
  // One kernel: widen, scale, shift and store in the target dtype and layout.
  return torch::addcmul_out(out, bias, x, scale);
}

struct DeviceFeed::Slot {
  data::Batch host;
  torch::Tensor labels;  // host copy of the labels (pinned on CUDA)
  NamedTensors fields;   // InputFormat::fields: the host tensors being copied
  DeviceBatch dev;
#if defined(TANDEM_WITH_CUDA)
  at::cuda::CUDAEvent start{cudaEventDefault};
  at::cuda::CUDAEvent done{cudaEventDefault};
#endif
};

struct DeviceFeed::Cuda {
#if defined(TANDEM_WITH_CUDA)
  c10::cuda::CUDAStream copy_stream;
  explicit Cuda(torch::Device d) : copy_stream(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, d.index())) {}
#endif
};

DeviceFeed::DeviceFeed(NextBatch next, const data::DatasetInfo& info, torch::Device device, InputFormat format)
    : next_(std::move(next)), info_(info), device_(device), format_(std::move(format)) {
#if defined(TANDEM_WITH_CUDA)
  if (device.is_cuda()) cuda_ = std::make_unique<Cuda>(device);
#endif
  if (format_.fields) return;  // nothing is converted
  const int64_t c = info.sample_shape.empty() ? 1 : info.sample_shape[0];
  const bool normalise = !info.mean.empty();
  // Per channel: uint8 batches scale by 1/255 first; mean and std then normalise.
  auto per_channel = [&](float base) {
    std::vector<float> scale(static_cast<size_t>(c), base), bias(static_cast<size_t>(c), 0.0f);
    if (normalise) {
      for (int64_t i = 0; i < c; ++i) {
        scale[i] = base / info.std[i];
        bias[i] = -info.mean[i] / info.std[i];
      }
    }
    std::vector<int64_t> shape(info.sample_shape.size() + 1, 1);
    shape[1] = c;
    return std::pair{torch::tensor(scale).view(shape).to(device), torch::tensor(bias).view(shape).to(device)};
  };
  std::tie(u8_scale_, u8_bias_) = per_channel(1.0f / 255.0f);
  if (normalise) std::tie(float_scale_, float_bias_) = per_channel(1.0f);
}

DeviceFeed::~DeviceFeed() = default;

void DeviceFeed::check(const data::Batch& batch) const {
  if (const std::string problem = data::batch_problem(batch, info_); !problem.empty()) {
    throw NetworkError(problem + ": the source that sent it is broken");
  }
}

bool DeviceFeed::prefetch() {
  const auto t0 = Clock::now();
  std::optional<data::Batch> batch = next_();
  wait_s_ += seconds_since(t0);
  if (!batch) return false;
  check(*batch);
  auto slot = std::make_unique<Slot>();
  slot->host = std::move(*batch);
  slot->dev = format_.fields ? upload_fields(slot->host, *slot) : upload(slot->host, *slot);
  ready_.push_back(std::move(slot));
  return true;
}

DeviceBatch DeviceFeed::upload(data::Batch& batch, Slot& slot) {
  const bool u8 = batch.dtype == data::DType::kUInt8;
  const torch::Tensor& scale = u8 ? u8_scale_ : float_scale_;
  const torch::Tensor& bias = u8 ? u8_bias_ : float_bias_;
  const int64_t n = batch.size();
  torch::Tensor x = torch::from_blob(batch.data.data(), batch.shape, torch::TensorOptions(scalar_type(batch.dtype)));
  DeviceBatch d;
  d.sequence = batch.sequence;
  d.size = n;
  if (!device_.is_cuda()) {
    const auto t0 = Clock::now();
    slot.labels = torch::from_blob(batch.labels.data(), {n}, torch::kInt64);
    d.x = to_input(x, scale, bias, format_.dtype, format_.channels_last);
    d.y = slot.labels;
    convert_s_ += seconds_since(t0);
    return d;
  }
#if defined(TANDEM_WITH_CUDA)
  c10::cuda::CUDAStreamGuard guard(cuda_->copy_stream);
  slot.labels = torch::empty({n}, torch::TensorOptions(torch::kInt64).pinned_memory(true));
  std::memcpy(slot.labels.data_ptr<int64_t>(), batch.labels.data(), static_cast<size_t>(n) * sizeof(int64_t));
  slot.start.record(cuda_->copy_stream);
  // The payload is pinned (install_pinned_buffers), so these copies are asynchronous.
  const torch::Tensor xd = x.to(device_, /*non_blocking=*/true);
  d.y = slot.labels.to(device_, /*non_blocking=*/true);
  d.x = to_input(xd, scale, bias, format_.dtype, format_.channels_last);
  slot.done.record(cuda_->copy_stream);
#endif
  return d;
}

// Every field as it is: on the CPU the host tensors themselves (views of the batch); on a
// GPU each copied on the side stream (small ones, over pageable memory, pinned first).
DeviceBatch DeviceFeed::upload_fields(data::Batch& batch, Slot& slot) {
  DeviceBatch d;
  d.sequence = batch.sequence;
  d.size = batch.size();
  slot.fields = host_fields(batch, info_);
  if (!device_.is_cuda()) {
    d.fields = slot.fields;
    return d;
  }
#if defined(TANDEM_WITH_CUDA)
  c10::cuda::CUDAStreamGuard guard(cuda_->copy_stream);
  slot.start.record(cuda_->copy_stream);
  for (auto& [name, host] : slot.fields) {
    if (!host.is_pinned()) host = host.pin_memory();
    d.fields.emplace_back(name, host.to(device_, /*non_blocking=*/true));
  }
  slot.done.record(cuda_->copy_stream);
#endif
  return d;
}

std::optional<DeviceBatch> DeviceFeed::take() {
  if (ready_.empty()) return std::nullopt;
  std::unique_ptr<Slot> slot = std::move(ready_.front());
  ready_.pop_front();
  DeviceBatch d = std::move(slot->dev);
#if defined(TANDEM_WITH_CUDA)
  if (device_.is_cuda()) {
    const c10::cuda::CUDAStream compute = c10::cuda::getCurrentCUDAStream(device_.index());
    slot->done.block(compute);
    // Made on the copy stream, used on the compute stream: the allocator must not reuse
    // their memory before the compute stream is done with it.
    if (d.x.defined()) d.x.record_stream(compute);
    if (d.y.defined()) d.y.record_stream(compute);
    for (auto& [name, t] : d.fields) t.record_stream(compute);
  }
#endif
  in_use_.push_back(std::move(slot));
  release_finished();
  return d;
}

// Host memory may go back once the copy that reads it has finished. On the CPU the
// previous batch's step has finished when the next is taken.
void DeviceFeed::release_finished() {
  while (in_use_.size() > 1) {
#if defined(TANDEM_WITH_CUDA)
    if (device_.is_cuda()) {
      Slot& s = *in_use_.front();
      if (!s.done.query() && in_use_.size() <= 4) return;
      s.done.synchronize();
      convert_s_ += s.start.elapsed_time(s.done) / 1000.0;
    }
#endif
    in_use_.pop_front();
  }
}

std::pair<double, double> DeviceFeed::drain_times() {
  const std::pair<double, double> out{wait_s_, convert_s_};
  wait_s_ = convert_s_ = 0;
  return out;
}

}  // namespace tandem::training
