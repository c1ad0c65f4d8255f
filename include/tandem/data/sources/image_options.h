// What a source of stored images (imagefolder, webdataset, manifest, mnist) takes from the
// settings (source_kinds.h image_options()): its samples' augmentation and how its files
// are read.
#pragma once

#include <cstdint>
#include <string>

#include "tandem/data/core/options.h"
#include "tandem/data/python/process_pool.h"

namespace tandem::data {

struct ImageOptions {
  uint64_t seed = 0;                 // --seed: with (epoch, index) it fixes every random choice
  uint64_t dataset_size = 0;         // --dataset-size: samples per epoch; 0 = one per image
  int image_size = 0;                // --image-size: 0 = the kind's default
  std::string split = "train";       // --split: mnist's files; the image datasets' default pipeline
  std::string pipeline;              // --pipeline; "" = the kind's default
  uint64_t max_image_pixels = kDefaultMaxImagePixels;  // --max-image-pixels
  std::string on_bad_sample = "fail";  // --on-bad-sample
  // Reads (stored images): reads in flight (--io-threads; -1 = auto, 0 = none ahead), the
  // engine (--io-engine), the bytes the read-ahead may hold (0 = 256 MiB) and, for
  // simulations, a delay added to every read (--emulate-read-latency-ms).
  int io_threads = -1;
  std::string io_engine = "auto";
  uint64_t read_ahead_bytes = 0;
  double emulate_read_latency_ms = 0;
  PythonRuntime python;              // a python() step's processes
};

}  // namespace tandem::data
