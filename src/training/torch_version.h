// One place to compare against the LibTorch version being compiled against. tandem
// builds with 1.13 (Debian bookworm), 2.6 (Debian trixie, CUDA) and pip 2.x (CUDA).
#pragma once

#include <torch/version.h>

// True when compiling against LibTorch MAJOR.MINOR or newer.
#define TANDEM_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))
