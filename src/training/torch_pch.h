// Precompiled header for the Torch translation units: parsing LibTorch dominates
// their build time, so it is parsed once per build.
#pragma once
#include <torch/torch.h>
