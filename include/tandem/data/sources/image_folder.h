// "imagefolder:PATH": image files in one subfolder per class, the layout of torchvision's
// ImageFolder and of a SageMaker channel (input/data/<channel>/<class>/...).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tandem/data/core/dataset.h"
#include "tandem/data/sources/image_options.h"

namespace tandem::data {

struct ImageFile {
  std::string path;    // relative to the root: "<class>/<...>/<name>"
  uint64_t bytes = 0;  // size when indexed
  int label = 0;       // index of its class folder
};

struct FolderIndex {
  std::vector<std::string> classes;        // sorted class folder names; label = position
  std::vector<ImageFile> files;            // by class, then (folder, file name): torchvision's order
  std::vector<std::string> empty_classes;  // class folders without an image file
  uint64_t ignored = 0;                    // files without a .jpg/.jpeg/.png extension
  std::string ignored_example;
};

// Lists the class folders under `root` (hidden ones, starting with '.', are skipped) and
// every .jpg/.jpeg/.png file below each, following symlinks. Sorted byte-wise, so every
// host agrees on index -> file. Throws ConfigError when `root` is not a readable directory
// or has no class folders.
FolderIndex index_folder(const std::string& root);

// The dataset over index_folder(root) with --pipeline (default
// "decode,random_resized_crop(S),hflip", or "decode,resize(S*256/224),center_crop(S)"
// with --split test; S = --image-size or 224). Samples are uint8 CHW; mean/std ImageNet's.
// An empty class folder is a ConfigError, or a skipped() entry under --on-bad-sample skip.
std::shared_ptr<const Dataset> make_image_folder(const ImageOptions& opts, const std::string& root);

// The canonical text of the pipeline make_image_folder(opts, ...) runs (as its description
// says it), known without the files. Throws ConfigError for a bad --pipeline.
std::string image_folder_pipeline(const ImageOptions& opts);

}  // namespace tandem::data
