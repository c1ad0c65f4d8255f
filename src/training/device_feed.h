// Host batches to device tensors (Torch world only), off the training loop's critical
// path. On a GPU:
//  - batches arrive in pinned host memory (install_pinned_buffers), so the copy is a
//    true asynchronous DMA;
//  - each is copied on a side stream and converted there, in one kernel, to the model's
//    input: uint8 or narrow floats -> normalised float32 or bfloat16, channels-last when
//    asked; an event marks it ready and the compute stream waits on that event, not the
//    host;
//  - `prefetch` is called after a step's kernels are queued, so the next batch travels
//    while the GPU computes (one batch ahead on the device).
// On the CPU the same calls convert synchronously.
// For a training_step model (InputFormat::fields) every field travels as it is, named
// (fields.h), and nothing is converted.
#pragma once

#include <cstring>
#include <deque>
#include <memory>
#include <optional>

#include <torch/types.h>

#include "fields.h"
#include "tandem/data/core/dataset.h"
#include "tandem/training/run_types.h"

namespace tandem::training {

// How device batches should look to the model.
struct InputFormat {
  torch::ScalarType dtype = torch::kFloat32;  // bfloat16 under bf16 autocast on CUDA
  bool channels_last = false;
  // Every field of the batch, named, as the dataset made it (DeviceBatch::fields), in
  // place of x and y: for a training_step model. dtype and channels_last do not apply.
  bool fields = false;
};

struct DeviceBatch {
  torch::Tensor x;  // [N, C, H, W] (or the dataset's sample shape) in the InputFormat
  torch::Tensor y;  // [N] int64
  NamedTensors fields;  // InputFormat::fields: every field, as fields.h says (x, y undefined)
  uint64_t sequence = 0;
  int64_t size = 0;
};

// Makes every later data::Buffer pinned host memory from Torch's caching host allocator,
// allocated with `device` current. A no-op without CUDA. Call once, before any source
// starts. The allocator rounds each block up to a power of two and keeps it for reuse:
// page-locked memory of about 2 x --prefetch batches per rank.
void install_pinned_buffers(torch::Device device);

// Converts `x` (uint8, float16, bfloat16 or float32) to the model's input in one pass:
// bias + x * scale (both broadcast per channel) into a tensor of `dtype`, channels-last
// when asked. Undefined scale and bias: only the dtype and layout change.
torch::Tensor to_input(const torch::Tensor& x, const torch::Tensor& scale, const torch::Tensor& bias,
                       torch::ScalarType dtype, bool channels_last);

class DeviceFeed {
 public:
  DeviceFeed(NextBatch next, const data::DatasetInfo& info, torch::Device device, InputFormat format);
  ~DeviceFeed();

  // Pulls the next host batch (blocking: the time spent is data wait) and starts its
  // copy and conversion. Returns false when the source is exhausted.
  bool prefetch();

  // The oldest prefetched batch; the current stream waits for it (no host sync).
  // nullopt when nothing was prefetched.
  std::optional<DeviceBatch> take();

  // Host seconds spent waiting in the source, and device seconds spent copying and
  // converting, since the last call. The latter needs the GPU: call it at log steps.
  std::pair<double, double> drain_times();

 private:
  struct Slot;
  DeviceBatch upload(data::Batch& batch, Slot& slot);
  DeviceBatch upload_fields(data::Batch& batch, Slot& slot);
  void check(const data::Batch& batch) const;
  void release_finished();

  NextBatch next_;
  data::DatasetInfo info_;
  torch::Device device_;
  InputFormat format_;
  std::deque<std::unique_ptr<Slot>> ready_;
  std::deque<std::unique_ptr<Slot>> in_use_;  // host memory a copy may still read
  torch::Tensor u8_scale_, u8_bias_;        // uint8: 1/255, then the dataset's mean and std
  torch::Tensor float_scale_, float_bias_;  // float wire dtypes: mean and std only (or none)
  double wait_s_ = 0, convert_s_ = 0;
  struct Cuda;
  std::unique_ptr<Cuda> cuda_;
};

}  // namespace tandem::training
