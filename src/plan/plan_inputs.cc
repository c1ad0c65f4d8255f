#include "tandem/plan/plan_inputs.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "tandem/common/error.h"
#include "tandem/common/text.h"

namespace tandem::plan {

namespace {

const char* const kRerun = "it was written by a tandem older than `tandem plan`: re-run the job with this version";

// The number at `pointer`, or nullopt when absent or null. Throws for a value that is
// there but is not a finite number >= 0.
std::optional<double> number_at(const nlohmann::json& j, const std::string& pointer) {
  const nlohmann::json::json_pointer ptr(pointer);
  if (!j.contains(ptr) || j.at(ptr).is_null()) return std::nullopt;
  const nlohmann::json& v = j.at(ptr);
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0) {
    throw ConfigError("summary.json field " + pointer.substr(1) + " is " + printable(v.dump(), 60) +
                      ", not a number of at least 0: the file is damaged; re-run the job or fix the field");
  }
  return v.get<double>();
}

std::string string_at(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

double global_batch(const nlohmann::json& s) {
  if (auto g = number_at(s, "/global_batch"); g && *g > 0) return *g;
  const auto batch = number_at(s, "/batch_size"), world = number_at(s, "/world_size");
  if (batch && world && *batch > 0 && *world > 0) return *batch * *world;
  throw ConfigError(std::string("summary.json has no global_batch (nor batch_size and world_size): ") + kRerun);
}

double ceiling(const nlohmann::json& s, const PlanOptions& o) {
  if (o.ceiling) {
    if (!(*o.ceiling > 0) || !std::isfinite(*o.ceiling)) throw ConfigError("--ceiling must be more than 0 samples/s");
    return *o.ceiling;
  }
  const auto c = number_at(s, "/throughput/ceiling_samples_per_sec");
  if (!c) {
    throw ConfigError(std::string("summary.json has no throughput.ceiling_samples_per_sec (how fast the training loop "
                                  "runs when it never waits for data): ") + kRerun +
                      ", or give it with --ceiling SAMPLES_PER_SEC (`tandem bench train` measures it)");
  }
  if (*c <= 0) {
    throw ConfigError("summary.json's throughput.ceiling_samples_per_sec is 0: the run trained no measurable step; "
                      "run it for more steps, or give --ceiling SAMPLES_PER_SEC");
  }
  return *c;
}

// The types a run outside SageMaker records: the one local host's group ("local", a run
// made by hand) and what discovery says when a source names no type ("unknown").
bool is_placeholder_type(const std::string& type) { return type == "local" || type == "unknown"; }

// Why an instance type the plan needs is not known, and the flag that gives it.
std::string unknown_type_message(const std::string& whose, const std::string& field, const std::string& recorded,
                                 const std::string& example) {
  const std::string why = recorded.empty()
                              ? "plan_inputs." + field + " is null: the run was outside SageMaker" +
                                    (field == "worker_instance_type" ? " or had no workers" : "")
                              : "the run recorded '" + printable(recorded, 60) + "' (plan_inputs." + field +
                                    "), which is no instance type: " +
                                    (recorded == "local" ? "it was made by hand, outside SageMaker"
                                                         : "its cluster names none (Kubernetes, torchrun)");
  return "the " + whose + " instance type is unknown (" + why + "): give the type to plan for, e.g. " + example +
         " (a SageMaker type is priced; any other name is planned in nodes, docs/plan.md)";
}

// The per-thread rate from the workers' measurements, weighted by their threads.
void worker_rate(const nlohmann::json& workers, RunMeasurements& m) {
  double weighted = 0.0;
  int threads = 0;
  std::set<std::string> types;
  std::string hosts;
  for (size_t i = 0; i < workers.size(); ++i) {
    const nlohmann::json& w = workers[i];
    if (!w.is_object()) throw ConfigError("summary.json plan_inputs.workers[" + std::to_string(i) + "] is not an object: the file is damaged");
    const std::string at = "/plan_inputs/workers/" + std::to_string(i);
    const double t = number_at(w, "/threads").value_or(0), rate = number_at(w, "/images_per_cpu_second").value_or(0);
    ++m.run_workers;
    types.insert(string_at(w, "instance_type"));
    const std::string host = string_at(w, "host").empty() ? string_at(w, "address") : string_at(w, "host");
    if (t <= 0 || rate <= 0) continue;  // made no batches (failed early): says nothing about the type
    m.workers_made += number_at(w, "/images_per_sec").value_or(0);
    weighted += rate * t;
    threads += static_cast<int>(t);
    hosts += (hosts.empty() ? "" : ", ") + host;
  }
  if (m.run_workers > 0 && threads == 0) {
    throw ConfigError("summary.json plan_inputs.workers measured no rate (threads or images_per_cpu_second is 0 for "
                      "every worker): they made no batches; check the workers served and run for more steps");
  }
  if (threads > 0) {
    m.workers_capacity = weighted;
    m.images_per_cpu_second = weighted / threads;
    m.rate_threads = threads;
    m.rate_from_workers = true;
    m.rate_hosts = hosts;
  }
  if (m.run_worker_type.empty() && types.size() == 1) m.run_worker_type = *types.begin();
}

void local_rate(const nlohmann::json& pi, RunMeasurements& m) {
  const auto threads = number_at(pi, "/local/threads"), rate = number_at(pi, "/local/images_per_cpu_second");
  const auto made = number_at(pi, "/local/images_per_sec");
  m.local_threads = static_cast<int>(threads.value_or(0));
  m.local_threads_known = threads.has_value();
  // Capacity (threads x per-thread rate), as for the workers: a measured rate may be held
  // back by the ceiling. The measured rate stands in when the parts are missing.
  const bool parts = threads && rate && *threads > 0 && *rate > 0;
  const double per_host = parts ? *threads * *rate : made.value_or(0);
  m.local = per_host * m.trainer_hosts;
  m.local_per_thread = parts ? *rate : 0.0;
  m.local_made_only = !parts && made.value_or(0) > 0;
  if (!m.rate_from_workers && rate && *rate > 0 && m.local_threads > 0) {
    m.images_per_cpu_second = *rate;
    m.rate_threads = m.local_threads;
    m.rate_hosts = "the trainer host";
  }
}

nlohmann::json or_null(const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); }

// For display: the number at `key` when it is one (finite, at least 0), else `fallback`.
double number_or(const nlohmann::json& j, const char* key, double fallback) {
  const auto it = j.is_object() ? j.find(key) : j.end();
  if (it == j.end() || !it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0) return fallback;
  return it->get<double>();
}

// The same for a count (threads, hosts, cores): a number too large for one is damage.
int count_or(const nlohmann::json& j, const char* key, int fallback) {
  const double v = number_or(j, key, fallback);
  return v <= 1e9 ? static_cast<int>(v) : fallback;
}

WorkerRate read_worker(const nlohmann::json& w) {
  WorkerRate r;
  r.address = string_at(w, "address");
  r.host = string_at(w, "host");
  r.instance_type = string_at(w, "instance_type");
  r.threads = count_or(w, "threads", 0);
  r.images_per_cpu_second = number_or(w, "images_per_cpu_second", 0);
  r.images_per_sec = number_or(w, "images_per_sec", 0);
  return r;
}

}  // namespace

nlohmann::json to_json(const PlanInputs& in) {
  nlohmann::json out = {{"trainer_instance_type", or_null(in.trainer_instance_type)},
                        {"trainer_hosts", in.trainer_hosts},
                        {"ranks", in.ranks},
                        {"trainer_host_cores", in.trainer_host_cores},
                        {"cpu_model", in.cpu_model},
                        {"local", nullptr},
                        {"workers", nlohmann::json::array()},
                        {"worker_instance_type", or_null(in.worker_instance_type)},
                        {"simulated", in.simulated},
                        {"bytes_per_sample", in.bytes_per_sample}};
  if (in.local) {
    out["local"] = {{"threads", in.local->threads},
                    {"images_per_cpu_second", in.local->images_per_cpu_second},
                    {"images_per_sec", in.local->images_per_sec}};
  }
  for (const WorkerRate& w : in.workers) {
    out["workers"].push_back({{"address", w.address},
                              {"host", or_null(w.host)},
                              {"instance_type", or_null(w.instance_type)},
                              {"threads", w.threads},
                              {"images_per_cpu_second", w.images_per_cpu_second},
                              {"images_per_sec", w.images_per_sec}});
  }
  return out;
}

PlanInputs read_plan_inputs(const nlohmann::json& summary) {
  PlanInputs in;
  const auto it = summary.is_object() ? summary.find("plan_inputs") : summary.end();
  if (it == summary.end() || !it->is_object()) return in;
  const nlohmann::json& pi = *it;
  in.trainer_instance_type = string_at(pi, "trainer_instance_type");
  in.trainer_hosts = count_or(pi, "trainer_hosts", 1);
  in.ranks = count_or(pi, "ranks", 1);
  in.trainer_host_cores = static_cast<unsigned>(count_or(pi, "trainer_host_cores", 0));
  in.cpu_model = string_at(pi, "cpu_model");
  if (const auto local = pi.find("local"); local != pi.end() && local->is_object()) {
    in.local = LocalRate{count_or(*local, "threads", 0),
                         number_or(*local, "images_per_cpu_second", 0), number_or(*local, "images_per_sec", 0)};
  }
  if (const auto workers = pi.find("workers"); workers != pi.end() && workers->is_array()) {
    for (const nlohmann::json& w : *workers) in.workers.push_back(read_worker(w));
  }
  in.worker_instance_type = string_at(pi, "worker_instance_type");
  const auto sim = pi.find("simulated");
  in.simulated = sim != pi.end() && sim->is_boolean() && sim->get<bool>();
  in.bytes_per_sample = number_or(pi, "bytes_per_sample", 0);
  return in;
}

RunMeasurements read_measurements(const nlohmann::json& s, const PlanOptions& o) {
  if (!s.is_object()) throw ConfigError("summary.json does not hold a JSON object: give a run's summary.json");
  const auto pi_it = s.find("plan_inputs");
  if (pi_it == s.end() || !pi_it->is_object()) throw ConfigError(std::string("summary.json has no plan_inputs: ") + kRerun);
  const nlohmann::json& pi = *pi_it;
  RunMeasurements m;
  m.global_batch = global_batch(s);
  m.ceiling = ceiling(s, o);
  const double hosts = number_at(pi, "/trainer_hosts").value_or(1);
  if (hosts < 1 || hosts > 100000) throw ConfigError("summary.json plan_inputs.trainer_hosts must be at least 1: the file is damaged");
  m.trainer_hosts = static_cast<int>(hosts);
  m.cpu_model = string_at(pi, "cpu_model");
  m.ranks = static_cast<int>(std::clamp(number_at(pi, "/ranks").value_or(1), 1.0, 1e6));
  m.bytes_per_sample = number_at(pi, "/bytes_per_sample").value_or(0);
  const double written = number_at(s, "/checkpoints/count").value_or(0);
  m.checkpoint_seconds = written > 0 ? number_at(s, "/checkpoints/seconds").value_or(0) / written : 0.0;
  m.startup_seconds = number_at(s, "/startup_seconds").value_or(0);
  m.data_wait_fraction = number_at(s, "/data_wait_fraction").value_or(0);
  const auto sim = pi.find("simulated");
  m.simulated = sim != pi.end() && sim->is_boolean() && sim->get<bool>();
  m.run_worker_type = string_at(pi, "worker_instance_type");
  const auto workers = pi.find("workers");
  if (workers != pi.end() && workers->is_array()) worker_rate(*workers, m);
  local_rate(pi, m);
  if (m.images_per_cpu_second <= 0) {
    throw ConfigError("summary.json measured no preprocessing rate (plan_inputs.workers and plan_inputs.local made no "
                      "batches, or their images_per_cpu_second is 0): run the job for more steps, with local threads "
                      "(--local-workers) or data workers");
  }
  const std::string run_trainer_type = string_at(pi, "trainer_instance_type");
  m.trainer_type = o.trainer_type.empty() ? run_trainer_type : o.trainer_type;
  m.worker_type = o.worker_type.empty() ? m.run_worker_type : o.worker_type;
  if (m.trainer_type.empty() || (o.trainer_type.empty() && is_placeholder_type(m.trainer_type))) {
    throw ConfigError(unknown_type_message("trainer's", "trainer_instance_type", run_trainer_type,
                                           "--trainer-type ml.p4d.24xlarge"));
  }
  if (m.worker_type.empty() || (o.worker_type.empty() && is_placeholder_type(m.worker_type))) {
    throw ConfigError(unknown_type_message("data workers'", "worker_instance_type", m.run_worker_type,
                                           "--worker-type ml.c5.18xlarge"));
  }
  if (auto g = number_at(s, "/throughput/global_samples_per_sec")) {
    m.run_samples_per_sec = *g;
  } else if (auto r = number_at(s, "/samples_per_sec"), w = number_at(s, "/world_size"); r && w) {
    m.run_samples_per_sec = *r * *w;
  }
  return m;
}

}  // namespace tandem::plan
