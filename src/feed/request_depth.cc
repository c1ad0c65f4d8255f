#include "tandem/feed/request_depth.h"

#include <algorithm>

#include "tandem/transport/byte_budget.h"

namespace tandem::feed {

RequestDepth::RequestDepth(int base, int most)
    : base_(std::max(1, base)), most_(std::max(base_, most)), depth_(base_), deepest_(base_) {}

int RequestDepth::update(int64_t wanted, int in_flight, int64_t batch_size) {
  const int64_t batch = std::max<int64_t>(1, batch_size);
  if (wanted > 0) {
    // Enough more requests to cover what it wants, counted from those out now (a reply
    // made before the last rise already counts them).
    const int64_t more = (wanted + batch - 1) / batch;
    depth_ = static_cast<int>(std::clamp<int64_t>(std::max<int64_t>(depth_, in_flight + more), base_, most_));
  } else if (wanted <= -2 * batch) {
    depth_ = std::max(base_, depth_ - 1);
  }
  deepest_ = std::max(deepest_, depth_);
  return depth_;
}

int max_prefetch(int prefetch, uint64_t batch_bytes) {
  constexpr uint64_t kMostBytes = uint64_t{4} << 30, kMostBatches = 1024;
  const uint64_t budget = std::min(transport::default_inflight_bytes() / 4, kMostBytes);
  const uint64_t batches = std::min(kMostBatches, budget / std::max<uint64_t>(1, batch_bytes));
  return std::max(prefetch, static_cast<int>(batches));
}

}  // namespace tandem::feed
