// Growing pauses between retries of something that failed for a reason that may pass
// (c10d's Backoff): the first pause is `initial`, each next one `factor` times longer, up
// to `max`; reset() after a success starts again from `initial`.
#pragma once

#include <algorithm>

namespace tandem {

struct BackoffOptions {
  double initial_s = 1;  // the first pause
  double factor = 2;     // each pause is this much longer than the last
  double max_s = 30;     // and never longer than this
};

class Backoff {
 public:
  explicit Backoff(BackoffOptions opts = {}) : opts_(opts), next_s_(opts.initial_s) {}

  // The pause to take now, in seconds; the one after it grows.
  double next() {
    const double now = next_s_;
    next_s_ = std::min(next_s_ * opts_.factor, opts_.max_s);
    return now;
  }

  // After a success: the next pause is `initial` again.
  void reset() { next_s_ = opts_.initial_s; }

 private:
  BackoffOptions opts_;
  double next_s_;
};

}  // namespace tandem
