// tandem.Feed(images=...): the images as the user's own transform ends them. A Python
// dataset tandem makes natively (a torchvision ImageFolder, tandem.Image files) whose
// Compose ends in ToTensor (and Normalize) travels as uint8 and lands as float32,
// normalised here as the batch is handed over: (x / 255 - mean) / std per channel, in
// float32 as ToTensor and Normalize compute it, so the values are torchvision's own.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "tandem/data/core/batch.h"
#include "tandem/data/core/dataset.h"

namespace tandem::python {

// The request's "images": "auto" (float32 where the dataset's description says its
// transform ends in a float tensor: output=float32), "uint8" (as they travel) or "float32"
// (always). Throws ConfigError for another value.
bool float_images(const nlohmann::json& request, const data::DatasetInfo& info);

// A uint8 [N, C, H, W] batch's images as float32, normalised with info's mean and std
// (none: x / 255). Other batches are left as they are.
void land_as_float(data::Batch& batch, const data::DatasetInfo& info);

}  // namespace tandem::python
