// What every sample is and how it is augmented (DataOptions), as the command line fills
// it (launch/settings.h); see docs/configuration.md. Each kind of source takes its own
// part of it (source_kinds.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem {

// Pillow's MAX_IMAGE_PIXELS: images up to about 9459 x 9459 pass.
inline constexpr uint64_t kDefaultMaxImagePixels = 89478485;

// What every sample is and how it is augmented. Trainer and workers must agree.
struct DataOptions {
  // --data: synthetic | blur-benchmark | premade | imagefolder[:PATH] | mnist[:PATH] |
  // webdataset[:PATH] | manifest:FILE | python:FILE:NAME (without PATH: the SageMaker
  // channel <sagemaker_root>/input/data/<channel>)
  std::string data = "synthetic";
  uint64_t seed = 0;               // --seed: with (epoch, index) it fixes every random choice
  int num_classes = 10;            // --num-classes
  int image_size = 0;              // --image-size: 0 = the dataset's default
  uint64_t dataset_size = 0;       // --dataset-size: samples per epoch; 0 = default
  // --wire-dtype: float32 | bfloat16 | float16 | uint8 (values in [0,1] x 255); empty =
  // the dataset's own (uint8 for imagefolder and mnist, else float32). The trainer
  // converts back to float on its device.
  std::string wire_dtype;
  // --pipeline: augmentation of imagefolder / mnist samples, e.g.
  // "decode,random_resized_crop(224),hflip,color_jitter(0.4,0.4,0.4),to_uint8" or a JSON
  // list; empty = the dataset's default. See docs/configuration.md.
  std::string pipeline;
  std::string channel = "train";        // --channel: SageMaker channel read when --data has no PATH
  std::string split = "train";          // --split: train | test (mnist's files; imagefolder's default pipeline)
  std::string on_bad_sample = "fail";   // --on-bad-sample: fail | skip (use the next good sample, list the bad one)
  // --require-deterministic: users' code whose samples differ when made twice (a worker's
  // check at start, two copies of one batch) is an error, not a warning.
  bool require_deterministic = false;
  // --max-image-pixels: an image file whose header declares more pixels is a bad sample
  // (a decompression bomb), refused before anything of it is decoded.
  uint64_t max_image_pixels = kDefaultMaxImagePixels;
  // --data python:FILE:NAME (docs/datasets.md): NAME's keyword arguments (--data-args, a
  // JSON object), the interpreter (--python; empty = /usr/bin/python3, else python3 on
  // PATH), its processes (--python-procs; 0 = the worker's --threads) and the most one
  // sample may take before its process is killed (--sample-timeout).
  std::string data_args = "{}";
  std::string python;
  int python_procs = 0;
  double sample_timeout_s = 60;
  // --python-native: "auto" makes a torchvision ImageFolder/DatasetFolder given as
  // python:FILE:NAME in C++ where its transform translates (docs/datasets.md); "off" runs it
  // as Python like any other dataset.
  std::string python_native = "auto";
  // Reading from slow storage (imagefolder, webdataset, manifest): threads that fetch the
  // bytes of requested samples ahead of preprocessing, many reads at once (--io-threads;
  // -1 = auto, io_threads_for(); 0 = none, each preprocessing thread reads its own), and,
  // for simulations only, a delay added to every sample read (--emulate-read-latency-ms).
  // Neither changes a sample.
  int io_threads = -1;
  double emulate_read_latency_ms = 0;
  // How the reads fly (--io-engine): "auto" (io_uring where the kernel allows it, else
  // threads), "uring" or "threads".
  std::string io_engine = "auto";
  // Where the SageMaker channels are (<root>/input/data/<channel>): --sagemaker-root, kept
  // by ClusterOptions and copied here by the command line (cli::finish_settings).
  std::string sagemaker_root = "/opt/ml";
};

// What the role that makes a dataset allows it, beside the flags: set by the roles, never
// by users (a worker: its shares of --max-inflight-mb; a trainer's feed: one Python
// process at start). The defaults: no role's limits.
struct DataRole {
  // The most shared memory its Python processes map together (0 = 4 GiB each).
  uint64_t python_shm_bytes = 0;
  // Python processes started at once (0 = all); the others start as threads need them.
  int python_start_procs = 0;
  // Fetched bytes its read-ahead may hold (0 = 256 MiB).
  uint64_t read_ahead_bytes = 0;
};

}  // namespace tandem
