#include <atomic>
#include <chrono>

#include <spdlog/spdlog.h>

#include "tandem/bench/bench.h"
#include "tandem/common/thread_pool.h"
#include "tandem/data/batching/convert.h"
#include "tandem/data/batching/sampler.h"
#include "tandem/data/core/dataset.h"
#include "tandem/data/sources/source_kinds.h"
#include "tandem/feed/local_source.h"
#include "tandem/feed/scheduler.h"
#include "tandem/training/runtime.h"
#include "tandem/training/trainer.h"

namespace tandem::bench {
namespace {

// Milliseconds per step of each phase, from a run's summed seconds.
nlohmann::json per_step_ms(const training::TrainReport& r) {
  const double n = r.steps > 0 ? static_cast<double>(r.steps) : 1.0;
  const training::StepTimes& t = r.step_times;
  return {{"step", 1000 * r.wall_seconds / n},
          {"data_wait", 1000 * t.data_wait / n},
          {"host_to_device", 1000 * t.host_to_device / n},
          {"forward_backward", 1000 * t.forward_backward / n},
          {"communication", 1000 * t.communication / n},
          {"optimizer", 1000 * t.optimizer / n}};
}

// Warm-up steps (cuDNN's autotuning, the allocators' first requests), then measured ones.
training::TrainReport measure(training::Trainer& trainer, const training::NextBatch& next, const TrainBenchOptions& o,
                              bool resident) {
  const std::atomic<bool> never{false};
  trainer.run(next, never, {o.warmup_steps, resident});
  return trainer.run(next, never, {o.steps, resident});
}

}  // namespace

nlohmann::json bench_train(const TrainBenchOptions& o) {
  DataOptions data = o.data;
  if (data.wire_dtype.empty()) data.wire_dtype = "uint8";  // what workers send
  auto dataset = data::make_dataset(data);
  const data::DatasetInfo& info = dataset->info();
  TrainerOptions opts = o.trainer;
  opts.log_every = static_cast<int>(std::max<int64_t>(o.steps, 1));
  const int64_t steps = 2 * (o.warmup_steps + o.steps);  // the ceiling's steps, then the fed run's
  const int cuda = training::cuda_device_count();
  const int cores = available_cores();
  const int threads = o.threads > 0 ? o.threads : (cuda ? std::max(cores - 1, 1) : 1);
  training::set_torch_threads(opts.train_threads > 0 ? opts.train_threads : (cuda ? 1 : std::max(cores - threads, 1)));
  training::Trainer trainer(training::trainer_config(opts, steps), info, training::DistInfo{}, training::RunPaths{});
  spdlog::info("bench train: {} batch {} on {} ({}), {} preprocessing threads for the fed run", opts.model,
               opts.batch_size, cuda ? "cuda:0" : "cpu", training::describe(training::torch_runtime()), threads);

  data::Sampler sampler(info.size, opts.batch_size, data.seed);
  feed::Scheduler scheduler([&](uint64_t seq) { return sampler.request(seq); },
                            {static_cast<uint64_t>(steps), opts.prefetch, opts.batch_timeout_s, 0});
  // Once the scheduler's window is full the source's threads sleep, so they do not
  // compete with the ceiling run, which uploads one real host batch and reuses it.
  feed::LocalSource source(scheduler, dataset, threads, data::wire_dtype(data));
  // Leaving by an exception (a diverged loss, out of GPU memory), the source's threads
  // must find the scheduler closed, or joining them waits for ever. Goes before `source`.
  struct CloseScheduler {
    feed::Scheduler& s;
    ~CloseScheduler() { s.close(); }
  } close_on_exit{scheduler};
  const training::TrainReport ceiling = measure(trainer, [&] { return scheduler.next(); }, o, true);
  const training::TrainReport fed = measure(trainer, [&] { return scheduler.next(); }, o, false);
  scheduler.close();

  const double samples_ceiling = ceiling.samples_per_sec, samples_fed = fed.samples_per_sec;
  return {{"bench", "train"},
          {"model", opts.model},
          {"batch_size", opts.batch_size},
          {"image_size", info.sample_shape.size() == 3 ? info.sample_shape[1] : 0},
          {"amp", opts.amp},
          {"channels_last", opts.channels_last},
          {"device", ceiling.device},
          {"torch", training::describe(training::torch_runtime())},
          {"torch_threads", ceiling.torch_threads},
          {"feed_threads", threads},
          {"steps", o.steps},
          {"ceiling_images_per_sec", samples_ceiling},
          {"fed_images_per_sec", samples_fed},
          {"fed_to_ceiling", samples_ceiling > 0 ? samples_fed / samples_ceiling : 0.0},
          {"ceiling_ms_per_step", per_step_ms(ceiling)},
          {"fed_ms_per_step", per_step_ms(fed)}};
}

}  // namespace tandem::bench
