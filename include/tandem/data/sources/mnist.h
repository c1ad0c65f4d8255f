// "mnist:PATH": MNIST-format idx files (MNIST, Fashion-MNIST, KMNIST...), gzipped or not.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tandem/data/core/dataset.h"
#include "tandem/data/sources/image_options.h"

namespace tandem::data {

// The image and label files `path` names for `split` ("train" | "test"). `path` is a
// folder holding <prefix>-images-idx3-ubyte[.gz] and <prefix>-labels-idx1-ubyte[.gz]
// (prefix "train" or "t10k"; the uncompressed file wins when both exist), or an images
// file itself, whose labels file is the same name with labels-idx1 for images-idx3.
// Throws ConfigError naming what is missing.
std::pair<std::string, std::string> mnist_files(const std::string& path, const std::string& split);

// The dataset of those files, loaded into memory and checked (magic numbers, sizes, equal
// counts) at construction. Samples are uint8 1x28x28 (or what --pipeline makes of them);
// mean/std are Fashion-MNIST's (0.2860, 0.3530) when the path names "fashion", else MNIST's
// (0.1307, 0.3081), unless the pipeline has normalize(...).
std::shared_ptr<const Dataset> make_mnist(const ImageOptions& opts, const std::string& path);

}  // namespace tandem::data
