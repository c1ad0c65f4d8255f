// tandem._tandem: tandem's feed (feed::Feeder, one RankFeed) for Python training scripts.
// Batches reach Python as numpy arrays over the feed's own memory (no copy): each array's
// base is a capsule that owns the C++ batch. Every wait releases the GIL and is cut into
// slices, so Ctrl-C (KeyboardInterrupt) ends it at once and closes the feed.
#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <future>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "feed_env.h"
#include "feed_settings.h"
#include "tandem/cluster/endpoint.h"
#include "tandem/common/clock.h"
#include "tandem/common/error.h"
#include "tandem/data/batching/convert.h"
#include "tandem/data/batching/sampler.h"
#include "tandem/feed/feeder.h"
#include "tandem/feed/rank_feed.h"
#include "tandem/report/output_root.h"
#include "tandem/report/run_summary.h"
#include "tandem/report/script_run.h"

namespace py = pybind11;

namespace tandem::python {
namespace {

// How long one wait lasts before Python's signals are looked at.
constexpr double kSliceS = 0.1;

// Python values as the text a flag or settings file would carry (as apply_setting_files
// reads JSON): True/False as true/false, a list as one value per element.
Setting to_setting(const std::string& key, const py::handle& value) {
  Setting s{key, {}};
  auto text = [](const py::handle& v) -> std::string {
    if (py::isinstance<py::bool_>(v)) return v.cast<bool>() ? "true" : "false";
    return py::str(v).cast<std::string>();
  };
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    for (const py::handle& v : value) s.values.push_back(text(v));
  } else {
    s.values.push_back(text(value));
  }
  return s;
}

std::vector<Setting> to_settings(const py::kwargs& kwargs) {
  std::vector<Setting> out;
  for (const auto& [k, v] : kwargs) {
    if (!v.is_none()) out.push_back(to_setting(k.cast<std::string>(), v));
  }
  return out;
}

std::vector<std::string> to_targets(const py::object& workers) {
  if (workers.is_none()) return {};
  if (py::isinstance<py::str>(workers)) {  // "a:1,b:2", as --workers takes them
    std::vector<std::string> out;
    const std::string all = workers.cast<std::string>();
    for (size_t start = 0; start <= all.size();) {
      const size_t comma = std::min(all.find(',', start), all.size());
      if (comma > start) out.push_back(all.substr(start, comma - start));
      start = comma + 1;
    }
    return out;
  }
  return workers.cast<std::vector<std::string>>();
}

py::dtype numpy_dtype(data::DType d) {
  switch (d) {
    case data::DType::kUInt8: return py::dtype::of<uint8_t>();
    case data::DType::kFloat32: return py::dtype::of<float>();
    case data::DType::kFloat16: return py::dtype("float16");
    case data::DType::kInt32: return py::dtype::of<int32_t>();
    case data::DType::kInt64: return py::dtype::of<int64_t>();
    case data::DType::kBFloat16: break;
  }
  throw ConfigError("wire_dtype bfloat16 has no numpy dtype: use float32, float16 or uint8 with tandem.Feed");
}

// The dataset as Python sees it.
py::dict dataset_dict(const data::DatasetInfo& i, const py::dtype& dtype) {
  py::dict d;
  d["name"] = i.name;
  d["size"] = i.size;
  d["sample_shape"] = i.sample_shape;
  d["num_classes"] = i.num_classes;
  py::list names;  // folder names as os.listdir gives them (bytes that are not UTF-8: surrogateescape)
  for (const std::string& n : i.class_names) {
    names.append(py::reinterpret_steal<py::str>(
        PyUnicode_DecodeUTF8(n.data(), static_cast<Py_ssize_t>(n.size()), "surrogateescape")));
  }
  d["class_names"] = names;
  d["dtype"] = dtype;
  d["mean"] = i.mean;
  d["std"] = i.std;
  d["fingerprint"] = i.fingerprint;
  py::list fields;  // the schema: what each batch holds
  for (const data::FieldSpec& f : i.schema()) {
    py::dict field;
    field["name"] = f.name;
    field["dtype"] = f.name == data::kImageField ? dtype : numpy_dtype(f.dtype);
    field["shape"] = f.shape;
    field["ragged"] = f.ragged();
    fields.append(field);
  }
  d["fields"] = fields;
  return d;
}

// One delivered batch: its fields by name, numpy views of the C++ batch, which the
// capsule owns. A ragged field NAME comes as NAME (the rows of every sample, in order),
// NAME_lengths (rows per sample) and NAME_offsets (where each sample's rows start, N+1).
struct PyBatch {
  py::dict fields;
  py::object indices;
  uint64_t sequence = 0;
  uint32_t epoch = 0;
  std::string source;

  py::object get(const std::string& name) const {
    return fields.contains(name) ? py::object(fields[py::str(name)]) : py::object(py::none());
  }
};

std::string names_of(const py::dict& fields) {
  std::string out;
  for (const auto& [k, v] : fields) out += (out.empty() ? "" : ", ") + k.cast<std::string>();
  return out;
}

py::object field_of(const PyBatch& b, const std::string& name) {
  if (!b.fields.contains(name)) {
    throw py::key_error("this batch has no field '" + name + "' (it has " + names_of(b.fields) + ")");
  }
  return b.fields[py::str(name)];
}

// (images, labels), so that `for images, labels in feed` reads a classification batch.
py::iterator unpack(const PyBatch& b) {
  if (!b.fields.contains(data::kImageField) || !b.fields.contains(data::kLabelField)) {
    throw py::type_error("this batch has fields " + names_of(b.fields) + ", not image and label: take them by name, "
                         "batch['name'] (only a batch with both unpacks as images, labels)");
  }
  const py::object images = b.fields[py::str(data::kImageField)], labels = b.fields[py::str(data::kLabelField)];
  return py::iter(py::make_tuple(images, labels));
}

// Each sample's rows of ragged field `name`: slices (views) of its values.
py::list rows_of(const PyBatch& b, const std::string& name) {
  const py::object values = field_of(b, name);
  if (!b.fields.contains(name + "_offsets")) throw py::key_error("field '" + name + "' is not ragged");
  const py::object offsets_field = b.fields[py::str(name + "_offsets")];
  const auto offsets = py::array_t<int64_t>::ensure(offsets_field);
  py::list out;
  for (py::ssize_t i = 0; i + 1 < offsets.size(); ++i) {
    const py::object rows = values[py::slice(offsets.at(i), offsets.at(i + 1), 1)];
    out.append(rows);
  }
  return out;
}

// The same batch with `fn` applied to every field (tandem.torch: torch.from_numpy).
PyBatch map_fields(const PyBatch& b, const py::function& fn) {
  PyBatch out = b;
  out.fields = py::dict();
  for (const auto& [k, v] : b.fields) out.fields[k] = fn(v);
  return out;
}

// A ragged field's arrays: values, lengths (a view) and offsets (computed: N+1 values).
void add_ragged(py::dict& fields, const data::Field& f, const py::capsule& base) {
  const std::vector<py::ssize_t> shape(f.shape.begin(), f.shape.end());
  const auto n = static_cast<py::ssize_t>(f.lengths.size());
  fields[py::str(f.name)] = py::array(numpy_dtype(f.dtype), shape, {}, f.data.data(), base);
  fields[py::str(f.name + "_lengths")] = py::array(py::dtype::of<int64_t>(), {n}, {}, f.lengths.data(), base);
  py::array_t<int64_t> offsets(n + 1);
  auto o = offsets.mutable_unchecked<1>();
  o(0) = 0;
  for (py::ssize_t i = 0; i < n; ++i) o(i + 1) = o(i) + f.lengths[static_cast<size_t>(i)];
  fields[py::str(f.name + "_offsets")] = offsets;
}

PyBatch to_python(data::Batch&& batch, std::string source) {
  auto* owned = new data::Batch(std::move(batch));
  py::capsule base(owned, [](void* p) { delete static_cast<data::Batch*>(p); });
  const std::vector<py::ssize_t> shape(owned->shape.begin(), owned->shape.end());
  const py::ssize_t n = owned->size();
  PyBatch out;
  if (owned->shape.size() > 1) {  // [N] alone: the dataset has no image
    out.fields[py::str(data::kImageField)] = py::array(numpy_dtype(owned->dtype), shape, {}, owned->data.data(), base);
  }
  if (!owned->labels.empty()) {
    out.fields[py::str(data::kLabelField)] = py::array(py::dtype::of<int64_t>(), {n}, {}, owned->labels.data(), base);
  }
  for (const data::Field& f : owned->fields) {
    if (!f.lengths.empty()) {  // ragged: a length per sample (batch_problem checked them)
      add_ragged(out.fields, f, base);
    } else {
      const std::vector<py::ssize_t> s(f.shape.begin(), f.shape.end());
      out.fields[py::str(f.name)] = py::array(numpy_dtype(f.dtype), s, {}, f.data.data(), base);
    }
  }
  out.indices = py::array(py::dtype::of<uint64_t>(), {static_cast<py::ssize_t>(owned->indices.size())}, {},
                          owned->indices.data(), base);
  out.sequence = owned->sequence;
  out.epoch = owned->epoch;
  out.source = std::move(source);
  return out;
}

// Raises KeyboardInterrupt (or what a signal handler raised) after `on_signal`.
template <typename F>
void check_signals(F&& on_signal) {
  if (PyErr_CheckSignals() != 0) {
    py::error_already_set e;
    on_signal();
    throw e;
  }
}

std::optional<std::vector<std::string>> optional_targets(const py::object& workers) {
  if (workers.is_none()) return std::nullopt;
  return to_targets(workers);
}

std::optional<int> optional_int(const py::object& v) {
  return v.is_none() ? std::nullopt : std::optional<int>(v.cast<int>());
}

// The process's run records (report::ScriptRun), made by its first feed on rank 0: the
// feeds of one script (one per epoch) add up to one run. A feed told to write elsewhere
// (another sagemaker_root or summary_json) starts another. Null when there is nowhere to
// write (the output folder could not be made).
std::shared_ptr<report::ScriptRun> script_run(const Settings& settings, const FeedPlace& place,
                                              uint64_t steps_per_epoch, uint64_t start_step) {
  static std::shared_ptr<report::ScriptRun> run;
  static std::optional<std::string> made_for;  // where the run was asked to write
  std::error_code ec;
  const std::string root = settings.cluster.sagemaker_root;
  const std::string wanted = settings.trainer.summary_json + "\n" + (std::filesystem::is_directory(root, ec) ? root : "");
  if (made_for == wanted) return run;
  made_for = wanted;
  run.reset();
  std::string summary = settings.trainer.summary_json;
  if (summary.empty()) {
    const std::string out = report::output_root(settings, place.rank);
    if (out.empty()) return nullptr;
    summary = out + "/output/data/summary.json";
  }
  report::ScriptRunOptions o{summary, start_step > 0, place.rank, place.world, settings.trainer.log_every,
                             steps_per_epoch};
  try {
    run = std::make_shared<report::ScriptRun>(o);
    spdlog::info("this run's metrics.jsonl, summary.json and report.html go to {}",
                 std::filesystem::path(summary).parent_path().string());
  } catch (const std::exception& e) {
    spdlog::warn("no metrics or summary for this run: {}", e.what());
  }
  return run;
}

class Feed {
 public:
  Feed(const py::object& workers, const py::object& rank, const py::object& world, int local_threads,
       uint64_t start_step, const py::object& epoch, bool release, const py::kwargs& kwargs)
      : release_(release), settings_(feed_settings(with_launcher_settings(to_settings(kwargs)))) {
    dtype_ = numpy_dtype(data::wire_dtype(settings_.data));
    batch_size_ = settings_.trainer.batch_size;
    place_ = feed_place(optional_targets(workers), optional_int(rank), optional_int(world), settings_,
                        /*need_workers=*/local_threads == 0);
    feed::FeederOptions opts{place_.workers, place_.rank, place_.world, local_threads, start_step, std::nullopt};
    if (!epoch.is_none()) opts.epoch = epoch.cast<uint64_t>();
    feeder_ = std::make_unique<feed::Feeder>(settings_, std::move(opts));
    try {
      for (;;) {
        if (without_gil([&] { return feeder_->wait_started(kSliceS); })) break;
        check_signals([&] { close(); });
      }
    } catch (...) {
      py::gil_scoped_release nogil;
      feeder_.reset();  // closes it
      throw;
    }
    length_ = feeder_->steps() - feeder_->start_step();
    batches_per_epoch_ = feeder_->sampler().batches_per_epoch();
    dataset_ = dataset_dict(feeder_->info(), dtype_);
    if (place_.rank == 0) run_ = script_run(settings_, place_, batches_per_epoch_, feeder_->start_step());
  }

  // The next batch, or StopIteration after the last step (or after close()).
  PyBatch next_batch() {
    if (closing_) close();
    if (!feeder_) throw py::stop_iteration();
    std::optional<data::Batch> batch;
    if (run_) run_->waiting();
    for (;;) {
      feed::Feeder::Status status;
      try {
        status = without_gil([&] { return feeder_->next(kSliceS, batch); });
      } catch (...) {
        close();
        throw;
      }
      if (status == feed::Feeder::Status::kBatch) break;
      if (status == feed::Feeder::Status::kEnd) {
        close();
        throw py::stop_iteration();
      }
      check_signals([&] { close(); });
    }
    if (batch->dtype == data::DType::kBFloat16) {
      close();
      throw ConfigError("the data workers send bfloat16 batches (their --wire-dtype), which numpy cannot hold: "
                        "start them with --wire-dtype float16, float32 or uint8");
    }
    if (run_) run_->taken(batch->size(), batch->sequence, feeder_->steps(), [&] { return feeder_->stats(); });
    return to_python(std::move(*batch), source_name(batch->source));
  }

  // Stops the feed's threads; tells the workers to exit when release_workers was asked.
  // Another Python thread may be waiting in next(): then the feed is only closed here
  // (that wait returns at once) and the waiter lets it go.
  void close() {
    if (!feeder_) return;
    closing_ = true;
    const bool release = release_ && !released_;
    if (release) released_ = true;
    without_gil([&] {
      feeder_->close();
      return 0;
    });
    // The records first: they ask the workers what they are, before they go.
    if (busy_ == 0) write_records();
    if (release) without_gil([&] { return feeder_->shutdown_workers("training script finished"); });
    if (busy_ > 0) return;  // the thread still inside lets it go (its next call ends in close())
    stats_ = stats_of(*feeder_);
    feeder_.reset();
  }

  int shutdown() {
    if (!feeder_) throw std::runtime_error("shutdown() on a closed feed: call tandem.shutdown_workers(workers)");
    released_ = true;
    return without_gil([&] { return feeder_->shutdown_workers("training script finished"); });
  }

  py::dict stats() const { return feeder_ ? stats_of(*feeder_) : stats_; }
  size_t len() const { return length_; }  // steps this feed delivers in all, even once closed
  bool closed() const { return !feeder_ || closing_; }
  int batch_size() const { return batch_size_; }
  uint64_t batches_per_epoch() const { return batches_per_epoch_; }
  py::dict dataset() const { return dataset_.attr("copy")(); }

 private:
  // Runs `f` with the GIL released; feeder_ stays alive meanwhile (close() on another
  // thread does not destroy it while busy_).
  template <typename F>
  auto without_gil(F&& f) -> decltype(f()) {
    struct Busy {
      int& n;
      explicit Busy(int& c) : n(c) { ++n; }
      ~Busy() { --n; }  // runs after the GIL is taken back
    } busy(busy_);
    py::gil_scoped_release nogil;
    return f();
  }

  std::string source_name(int source) {
    if (source < 0) return "";
    if (static_cast<size_t>(source) >= names_.size()) {
      names_.clear();
      for (const auto& s : feeder_->stats()) names_.push_back(s.name);
    }
    return static_cast<size_t>(source) < names_.size() ? names_[source] : "";
  }

  static py::dict stats_of(const feed::Feeder& f) {
    py::list sources;
    for (const auto& s : f.stats()) {
      py::dict d;
      d["name"] = s.name;
      d["batches"] = s.batches;
      d["samples"] = s.samples;
      d["compute_seconds"] = s.compute_seconds;
      d["failed"] = s.failed;
      d["error"] = s.error;
      d["rejoins"] = s.rejoins;
      sources.append(d);
    }
    py::dict out;
    out["sources"] = sources;
    out["hedged_requests"] = f.hedged();
    return out;
  }

  // Rank 0: adds this feed to the run's records and writes the summary and report.html
  // (a feed that delivered nothing adds nothing). Never throws: the script's batches
  // matter more than its records.
  void write_records() {
    if (!run_ || !feeder_->started()) return;
    const std::vector<feed::SourceStats> sources = feeder_->stats();
    uint64_t batches = 0;
    for (const auto& s : sources) batches += s.batches;
    run_->feed_ended(sources, feeder_->hedged());
    if (batches == 0) return;
    report::RunSummaryFacts facts{settings_, feeder_->rank_feed(), {}, 0, place_.cluster};
    facts.world = place_.world;
    facts.local_world = place_.local_world;
    facts.local_threads = feeder_->rank_feed().local_threads();
    facts.batch_size = batch_size_;
    facts.steps_per_epoch = batches_per_epoch_;
    facts.simulated = place_.simulated;
    without_gil([&] {
      try {
        run_->write_summary(facts);
      } catch (const std::exception& e) {
        spdlog::warn("no summary for this run: {}", e.what());
      }
      return 0;
    });
  }

  std::unique_ptr<feed::Feeder> feeder_;
  bool release_ = false;
  Settings settings_;
  FeedPlace place_;
  std::shared_ptr<report::ScriptRun> run_;  // the process's run (rank 0), or null
  bool released_ = false;
  int batch_size_ = 0;
  size_t length_ = 0;
  uint64_t batches_per_epoch_ = 0;
  py::dtype dtype_;
  py::dict dataset_;
  std::vector<std::string> names_;
  int busy_ = 0;          // threads inside without_gil(); read and written with the GIL held
  bool closing_ = false;  // close() was called; feeder_ goes once no thread is inside
  py::dict stats_;  // kept at close()
};

int shutdown_workers(const py::object& workers, const std::string& reason, const py::kwargs& kwargs) {
  const Settings settings = feed_settings(to_settings(kwargs));
  const std::vector<std::string> targets = to_targets(workers);
  py::gil_scoped_release nogil;
  return feed::release_workers(targets, settings.security, reason);
}

// Runs `f` on a thread of its own, looking at Python's signals every slice: Ctrl-C sets
// `stop` (which `f` watches), waits for it to end and raises KeyboardInterrupt.
template <typename F>
auto interruptibly(std::atomic<bool>& stop, F&& f) -> decltype(f()) {
  auto result = std::async(std::launch::async, std::forward<F>(f));
  for (;;) {
    {
      py::gil_scoped_release nogil;
      if (result.wait_for(seconds(kSliceS)) == std::future_status::ready) break;
    }
    check_signals([&] {
      stop = true;
      py::gil_scoped_release nogil;
      result.wait();
    });
  }
  return result.get();
}

// What a Feed with these arguments would deliver: steps, batch size, batches per epoch and
// the dataset, found as the Feed finds it (this host's copy of --data, else learnt from
// the workers: then it waits for one to answer, up to connect_timeout). Raises ValueError
// as Feed would.
py::dict plan(const py::object& workers, const py::object& rank, const py::object& world, int local_threads,
              uint64_t start_step, const py::kwargs& kwargs) {
  const Settings settings = feed_settings(with_launcher_settings(to_settings(kwargs)));
  const FeedPlace place = feed_place(optional_targets(workers), optional_int(rank), optional_int(world), settings,
                                     /*need_workers=*/false);
  const py::dtype dtype = numpy_dtype(data::wire_dtype(settings.data));
  feed::FeederOptions f{place.workers, place.rank, place.world, local_threads, start_step, std::nullopt};
  for (auto& w : f.workers) w = cluster::with_default_port(w, settings.cluster.worker_port);
  std::atomic<bool> stop{false};
  const auto feed = interruptibly(stop, [&] {
    return std::make_unique<feed::RankFeed>(feed::feeder_feed_options(settings, f), stop);
  });
  const auto steps = static_cast<uint64_t>(settings.trainer.steps);
  if (start_step > steps) {
    throw ConfigError("start_step " + std::to_string(start_step) + " is past steps " + std::to_string(steps) +
                      ": resume at a step before the last");
  }
  py::dict d;
  d["steps"] = steps - start_step;
  d["batch_size"] = settings.trainer.batch_size;
  d["batches_per_epoch"] = feed->sampler().batches_per_epoch();
  d["dataset"] = dataset_dict(feed->info(), dtype);
  d["rank"] = place.rank;
  d["world"] = place.world;
  d["workers"] = place.workers;
  return d;
}

void set_log_level(const std::string& level) {
  const spdlog::level::level_enum l = spdlog::level::from_str(level == "warning" ? "warn" : level);
  if (l == spdlog::level::off && level != "off") {
    throw ConfigError("unknown log level '" + level + "': use debug, info, warning, error or off");
  }
  spdlog::set_level(l);
}

}  // namespace
}  // namespace tandem::python

namespace {

const char* const kFeedDoc = R"(Streams batches from tandem data workers, and from threads of this process, in step order.

Feed(workers=None, *, rank=None, world=None, local_threads=0, start_step=0, epoch=None,
     release_workers=False, **settings)

workers: the data workers, a list of "host:port" (or one "a:1,b:2" string, like --workers).
    None: those `tandem launch` names ($TANDEM_WORKERS), else the worker groups of the
    cluster tandem discovers (SageMaker's resourceconfig.json under sagemaker_root, ...),
    else none (local_threads only).
rank, world: this process's slice of every global batch of world x batch_size samples.
    None: $RANK and $WORLD_SIZE (torchrun, tandem launch), else this host's place among
    the cluster's trainer hosts, else 0 and 1.
local_threads: threads of this process that make batches too (0: workers only).
start_step: the first step delivered, to resume (batches are a pure function of seed and step).
epoch: deliver exactly this epoch (its batches_per_epoch steps, a new shuffle and
    augmentation per epoch) instead of steps [start_step, steps).
release_workers: when the feed ends or is closed, tell every worker to exit.
**settings: tandem's own settings with '_' for '-' (tandem.setting_names() lists them):
    data, seed, image_size, dataset_size, num_classes, wire_dtype, pipeline, split, channel,
    on_bad_sample, sagemaker_root, batch_size, steps, inflight, prefetch, connect_timeout,
    batch_timeout, log_every, summary_json, token, token_file, job_name, tls_ca, tls_cert,
    tls_key, tls_server_name. Under `tandem launch`, those in $TANDEM_SETTINGS come first.

A dataset this host has no copy of (no data on a GPU host) is learnt from the workers; the
settings it fixes without the files (seed, pipeline, image size, ...) must match theirs.
Iterating gives a Batch per step: numpy arrays over tandem's own buffers (no copy) by field
name, batch["image"] (N, C, H, W) in the wire dtype, batch["label"] (N,) int64, and the
dataset's other fields (a ragged field NAME as NAME, NAME_lengths, NAME_offsets; see
batch.rows(NAME)). A batch with image and label unpacks: for images, labels in feed. A bad
setting, or a worker serving other data, raises ValueError with tandem's message; a feed
that cannot go on (no worker answers within connect_timeout, every source failed, no batch
within batch_timeout) raises RuntimeError. Every wait can be interrupted with Ctrl-C.
Rank 0 measures the run (the time spent waiting in next() is its data wait) and writes
metrics.jsonl, summary.json and report.html, as tandem's trainer does. See docs/python.md.)";

}  // namespace

namespace tandem::python {
namespace {

// tandem.Batch.
void bind_batch(py::module_& m) {
  py::class_<PyBatch>(m, "Batch",
                      "One batch's fields by name (batch['image'], batch['mask'], 'boxes' with 'boxes_lengths' and "
                      "'boxes_offsets' for a ragged field), numpy arrays over tandem's buffers; keys(), values(), "
                      "items(), len, in. A batch with image and label unpacks as images, labels = batch. Also: "
                      "indices (the samples it was made from), sequence, epoch, source")
      .def("__getitem__", &field_of, py::arg("name"), "The field's array; KeyError naming the fields there are")
      .def("__contains__", [](const PyBatch& b, const std::string& name) { return b.fields.contains(name); },
           "Whether it holds an array of that name")
      .def("__len__", [](const PyBatch& b) { return b.fields.size(); }, "How many arrays (fields) it holds")
      .def("__iter__", &unpack, "(images, labels): only a batch with both fields unpacks; else TypeError")
      .def("keys", [](const PyBatch& b) { return b.fields.attr("keys")(); }, "The field names, image and label first")
      .def("values", [](const PyBatch& b) { return b.fields.attr("values")(); }, "The arrays, in keys() order")
      .def("items", [](const PyBatch& b) { return b.fields.attr("items")(); }, "(name, array) pairs")
      .def(
          "get",
          [](const PyBatch& b, const std::string& name, const py::object& dflt) {
            return b.fields.contains(name) ? py::object(b.fields[py::str(name)]) : dflt;
          },
          py::arg("name"), py::arg("default") = py::none(), "The field's array, or default without one")
      .def("to_dict", [](const PyBatch& b) { return b.fields.attr("copy")(); }, "The fields as a new dict")
      .def("rows", &rows_of, py::arg("name"),
           "A ragged field's rows, one view (no copy) per sample: values[offsets[i]:offsets[i+1]]")
      .def("map", &map_fields, py::arg("fn"),
           "The same batch with fn applied to every field, e.g. batch.map(torch.from_numpy)")
      .def_property_readonly("images", [](const PyBatch& b) { return b.get(data::kImageField); },
                             "batch['image'], or None without one")
      .def_property_readonly("labels", [](const PyBatch& b) { return b.get(data::kLabelField); },
                             "batch['label'], or None without one")
      .def_readonly("indices", &PyBatch::indices)
      .def_readonly("sequence", &PyBatch::sequence)
      .def_readonly("epoch", &PyBatch::epoch)
      .def_readonly("source", &PyBatch::source);
}

// tandem.Feed.
void bind_feed(py::module_& m) {
  py::class_<Feed>(m, "Feed", kFeedDoc)
      .def(py::init<const py::object&, const py::object&, const py::object&, int, uint64_t, const py::object&, bool,
                    const py::kwargs&>(),
           py::arg("workers") = py::none(), py::kw_only(), py::arg("rank") = py::none(),
           py::arg("world") = py::none(), py::arg("local_threads") = 0, py::arg("start_step") = 0,
           py::arg("epoch") = py::none(), py::arg("release_workers") = false,
           "Connects to the workers (waiting up to connect_timeout for one to answer), checks that they serve "
           "this dataset, and starts streaming: workers, rank, world, local_threads, start_step, epoch, "
           "release_workers and **settings as in help(tandem.Feed)")
      .def("__iter__", [](py::object self) { return self; }, "The feed itself: it is its own iterator")
      .def("__next__", &Feed::next_batch, "The next Batch (unpacks as images, labels); StopIteration after the last step")
      .def("next_batch", &Feed::next_batch,
           "The next Batch (images, labels, indices, sequence, epoch, source); StopIteration after the last step")
      .def("__len__", &Feed::len, "Steps this feed delivers in all: steps - start_step")
      .def("close", &Feed::close,
           "Stops streaming at once (a wait in another thread ends); batches already taken stay valid. With "
           "release_workers, tells the workers to exit")
      .def("shutdown", &Feed::shutdown, "Tell every worker to exit now; returns how many acknowledged")
      .def("stats", &Feed::stats,
           "Per source (sources: name, batches, samples, compute_seconds, failed, error, rejoins) and "
           "hedged_requests")
      .def("__enter__", [](py::object self) { return self; }, "The feed; leaving the with block closes it")
      .def("__exit__", [](Feed& f, py::args) { f.close(); }, "Closes the feed")
      .def_property_readonly("closed", &Feed::closed, "True once close() was called or the last step was taken")
      .def_property_readonly("batch_size", &Feed::batch_size, "Samples per batch (per rank and step)")
      .def_property_readonly("batches_per_epoch", &Feed::batches_per_epoch,
                             "Global batches in one pass over the dataset: dataset size // (world x batch_size)")
      .def_property_readonly("dataset", &Feed::dataset,
                             "The dataset (name, size, sample_shape, num_classes, dtype, mean, std, fingerprint, class_names, "
                             "fields: each field's name, dtype, shape and ragged), as "
                             "tandem.plan() and TandemDataset.dataset_info give it");
}

}  // namespace
}  // namespace tandem::python

namespace {

// A Python dataset made in this process (local_threads, tandem.plan) runs the
// _dataset_worker.py installed beside this module, unless TANDEM_DATASET_WORKER says
// otherwise: the process's binary is Python's, not tandem's (data::find_dataset_worker).
void point_at_dataset_worker() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&point_at_dataset_worker), &info) == 0 || !info.dli_fname) return;
  const std::filesystem::path script = std::filesystem::path(info.dli_fname).parent_path() / "_dataset_worker.py";
  std::error_code ec;
  if (std::filesystem::is_regular_file(script, ec)) setenv("TANDEM_DATASET_WORKER", script.c_str(), 0);
}

}  // namespace

PYBIND11_MODULE(_tandem, m) {
  using namespace tandem::python;
  point_at_dataset_worker();
  m.doc() = "tandem's data plane for Python training scripts (docs/python.md)";
  // Log lines go to stderr, as the command line's do; stdout stays the script's.
  if (!spdlog::get("tandem")) spdlog::set_default_logger(spdlog::stderr_color_mt("tandem"));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ tandem: %v");
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const tandem::ConfigError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });
  bind_batch(m);
  bind_feed(m);
  m.def("shutdown_workers", &shutdown_workers, py::arg("workers"), py::kw_only(),
        py::arg("reason") = "training script finished",
        "Tells each of workers (a list of \"host:port\", or one \"a:1,b:2\" string) to exit, with reason in its "
        "log; takes the security settings (token, token_file, job_name, tls_*) as keyword arguments. Returns how "
        "many acknowledged");
  m.def("plan", &plan, py::arg("workers") = py::none(), py::kw_only(), py::arg("rank") = py::none(),
        py::arg("world") = py::none(), py::arg("local_threads") = 0, py::arg("start_step") = 0,
        "What a Feed with these arguments would deliver (steps, batch_size, batches_per_epoch, dataset, and the "
        "rank, world and workers it found), its dataset found as the Feed finds it: this host's copy of the "
        "data, else learnt from the workers (waiting up to connect_timeout for one)");
  m.def("setting_names", &feed_setting_names, "The data settings tandem.Feed accepts as keyword arguments");
  m.def("set_log_level", &set_log_level, py::arg("level"),
        "tandem's log level on stderr: level is debug, info, warning, error or off");
  m.attr("__version__") = "0.1.0";
}
