// Mixed precision (Torch world only). The autocast API changed in LibTorch 2.4, from
// per-device functions to device-type arguments; this hides the difference.
#pragma once

#include <ATen/autocast_mode.h>
#include "torch_version.h"

namespace tandem::training {

// Enables bf16 autocast on `device` for its lifetime.
class Autocast {
 public:
  Autocast(bool enabled, bool cuda) : enabled_(enabled), cuda_(cuda) {
    if (enabled_) set(true);
  }
  ~Autocast() {
    if (!enabled_) return;
    set(false);
    at::autocast::clear_cache();
  }
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  void set(bool on) {
#if TANDEM_TORCH_AT_LEAST(2, 4)
    const auto type = cuda_ ? at::kCUDA : at::kCPU;
    at::autocast::set_autocast_dtype(type, at::kBFloat16);
    at::autocast::set_autocast_enabled(type, on);
#else
    if (cuda_) {
      at::autocast::set_autocast_gpu_dtype(at::kBFloat16);
      at::autocast::set_enabled(on);
    } else {
      at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
      at::autocast::set_cpu_enabled(on);
    }
#endif
  }
  bool enabled_;
  bool cuda_;
};

}  // namespace tandem::training
