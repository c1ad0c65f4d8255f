// A torchvision image folder made natively (issue 52). A python:FILE:NAME dataset that is
// an ImageFolder (or DatasetFolder) with torchvision's default loader and a transform
// tandem has steps for is described by its first Python process
// (python/tandem/_torchvision_native.py): its sample list, classes and the steps its
// transform translates to. This serves that as tandem's own stored images: decoded and
// augmented in C++, read ahead, seeded per sample, --on-bad-sample as for imagefolder.
#pragma once

#include <memory>
#include <string>

#include "tandem/data/core/dataset.h"
#include "tandem/data/sources/image_options.h"

namespace tandem::data {

// The dataset the description `native_json` (root, classes, count, list_file, steps,
// transform) names, with `images`' settings and its steps as the pipeline. `source` names
// it in messages; `description` starts its fingerprint's description (the python/v1 kind,
// the file's code, name and args). Removes the list file. Throws ConfigError for a list
// that does not match the description.
std::shared_ptr<const Dataset> make_torchvision_folder(ImageOptions images, const std::string& native_json,
                                                       const std::string& source, const std::string& description);

}  // namespace tandem::data
