#include "tandem/report/summary.h"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <thread>

#include <spdlog/spdlog.h>

#include "tandem/common/files.h"
#include "tandem/report/html_report.h"
#include "tandem/report/output_root.h"

namespace tandem::report {
namespace {

// When this process started, as file times go: output/failure older than it is an
// earlier run's.
const std::filesystem::file_time_type kProcessStarted = std::filesystem::file_time_type::clock::now();

// `host` as a file name's suffix: letters, digits, '.', '-' and '_' kept, the rest '_'.
std::string file_name_of(const std::string& host) {
  std::string out;
  for (char ch : host.substr(0, 100)) out += std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-' || ch == '_' ? ch : '_';
  return out.empty() || out.front() == '.' ? "_" + out : out;
}

// Now, as 2026-11-28T10:42:07Z.
std::string iso_now() {
  const std::time_t t = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

std::string this_host() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

double per_cpu_second(const SourceStats& s) {
  return s.compute_seconds > 0 ? static_cast<double>(s.samples) / s.compute_seconds : 0.0;
}

// "model name" of /proc/cpuinfo, or "unknown".
std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown";
}

}  // namespace

nlohmann::json throughput(const TrainReport& train) {
  const double training_s = train.wall_seconds - train.paused_seconds;
  // The loop's ceiling from the log windows after the first (no warm-up), else the whole run.
  const bool steady = train.steady_busy_seconds > 0;
  const double busy_s = steady ? train.steady_busy_seconds : training_s - train.data_wait_seconds;
  const double samples = steady ? train.steady_samples : static_cast<double>(train.samples);
  const double global = train.samples_per_sec * train.world;
  return {{"global_samples_per_sec", global},
          {"per_rank_samples_per_sec", train.samples_per_sec},
          {"ceiling_samples_per_sec", busy_s > 0 ? train.world * samples / busy_s : 0.0}};
}

plan::PlanInputs measure_plan_inputs(const TrainReport& train, const std::vector<SourceStats>& sources,
                                     const std::vector<WorkerFacts>& workers, const std::string& trainer_instance_type,
                                     int trainer_hosts, int local_threads) {
  const double training_s = train.wall_seconds - train.paused_seconds;
  plan::PlanInputs out;
  out.trainer_instance_type = trainer_instance_type;
  out.trainer_hosts = trainer_hosts;
  out.ranks = train.world;
  out.trainer_host_cores = std::thread::hardware_concurrency();
  out.cpu_model = cpu_model();
  uint64_t bytes = 0, samples = 0;
  for (const auto& s : sources) {
    bytes += s.bytes;
    samples += s.samples;
  }
  out.bytes_per_sample = samples > 0 ? static_cast<double>(bytes) / static_cast<double>(samples) : 0.0;
  for (const auto& s : sources) {
    const double rate = training_s > 0 ? static_cast<double>(s.samples) / training_s : 0.0;
    if (s.name == "local") {
      out.local = plan::LocalRate{local_threads, per_cpu_second(s), rate};
      continue;
    }
    WorkerFacts facts{s.name, "", "", 0};
    for (const auto& w : workers) {
      if (w.address == s.name) facts = w;
    }
    out.workers.push_back({s.name, facts.host, facts.instance_type, facts.threads, per_cpu_second(s), rate});
    if (out.worker_instance_type.empty()) out.worker_instance_type = facts.instance_type;
  }
  // No local threads: the trainer hosts made nothing, and the plan must know it (their
  // spare cores are no source for a run like this one).
  if (!out.local && local_threads == 0) out.local = plan::LocalRate{0, 0.0, 0.0};
  return out;
}

nlohmann::json make_summary(const TrainReport& train, const std::vector<SourceStats>& sources) {
  nlohmann::json workers = nlohmann::json::array();
  uint64_t total = 0;
  for (const auto& s : sources) total += s.batches;
  for (const auto& s : sources) {
    nlohmann::json w = {
        {"address", s.name},
        {"batches", s.batches},
        {"samples", s.samples},
        {"images_per_sec", train.wall_seconds > 0 ? s.samples / train.wall_seconds : 0.0},
        {"share", total ? static_cast<double>(s.batches) / total : 0.0},
        {"compute_seconds", s.compute_seconds},
        {"failed", s.failed}, {"rejoins", s.rejoins},
        {"ahead", s.ahead}, {"hedged", s.hedged}, {"requests_deepest", s.deepest}};
    if (s.failed) w["error"] = s.error;
    if (!s.left.empty()) w["left"] = s.left;
    workers.push_back(std::move(w));
  }
  nlohmann::json out = {{"steps", train.steps},
          {"samples", train.samples},
          {"samples_per_sec", train.samples_per_sec},
          {"data_wait_fraction", train.data_wait_fraction},
          {"first_loss", train.first_loss},
          {"final_loss", train.final_loss},
          {"wall_seconds", train.wall_seconds},
          {"interrupted", train.interrupted},
          {"model", train.model},
          {"device", train.device},
          {"compute_dtype", train.compute_dtype},
          {"memory_layout", train.memory_layout},
          {"torch_threads", train.torch_threads},
          {"workers", std::move(workers)},
          {"start_step", train.start_step},
          {"losses", train.losses},
          {"rank", train.rank},
          {"world_size", train.world},
          {"param_checksums", train.param_checksums}};
  const StepTimes& t = train.step_times;
  out["step_seconds"] = {{"data_wait", t.data_wait},
                         {"host_to_device", t.host_to_device},
                         {"forward_backward", t.forward_backward},
                         {"communication", t.communication},
                         {"optimizer", t.optimizer}};
  if (t.script > 0) out["step_seconds"]["script"] = t.script;
  out["grad_buckets"] = train.grad_buckets;
  out["grad_buckets_overlapped"] = train.grad_buckets_overlapped;
  if (!train.last_checkpoint.empty()) out["checkpoint_dir"] = train.last_checkpoint;
  // What a restart costs (the plan's spot terms): start-up to the first step, and writing
  // a checkpoint.
  out["startup_seconds"] = train.startup_seconds;
  out["checkpoints"] = {{"count", train.checkpoints}, {"seconds", train.checkpoint_seconds}};
  if (!train.model_file.empty()) out["model_file"] = train.model_file;
  if (!train.model_error.empty()) out["model_error"] = train.model_error;
  if (train.eval_accuracy) {
    out["eval_accuracy"] = *train.eval_accuracy;
    out["eval_history"] = train.eval_history;
  }
  return out;
}

void write_summary_and_report(const std::string& path, const nlohmann::json& summary) {
  write_file_atomically(path, summary.dump(2) + "\n");
  append_run(path, summary);
  try {
    spdlog::info("report in {}", write_run_report(path));
  } catch (const std::exception& e) {
    spdlog::warn("no report.html: {} (tandem report {} makes one later)", e.what(), path);
  }
}

void append_run(const std::string& summary_path, const nlohmann::json& summary) {
  nlohmann::json line = {{"ended", iso_now()}};
  for (const char* key : {"start_step", "steps", "interrupted", "failure", "exit_code", "final_loss", "wall_seconds"}) {
    if (summary.contains(key)) line[key] = summary[key];
  }
  const std::string path = (std::filesystem::path(summary_path).parent_path() / "runs.jsonl").string();
  std::ofstream out(path, std::ios::app);
  out << line.dump() << "\n";
  if (!out) spdlog::warn("could not add this run to {}", path);
}

bool write_failure(const std::string& sagemaker_root, const std::string& host, const std::string& reason,
                   bool replace_first) {
  namespace fs = std::filesystem;
  // Outside SageMaker (a developer's shell, CI) the root usually does not exist: don't create it.
  if (!fs::is_directory(sagemaker_root)) return false;
  release_reserve(records_reserve(sagemaker_root));  // a full disk still takes this
  bool took = false;
  const std::string first = sagemaker_root + "/output/failure";
  const std::string mine = first + "." + file_name_of(host.empty() ? this_host() : host);
  try {
    write_file_atomically(mine, reason + "\n");
    // output/failure: the first cause of this run. Taken with link(), which fails when it
    // is there, so that two hosts failing at once cannot overwrite each other; one older
    // than this process is an earlier run's, and replaced.
    const std::string staged = mine + ".first";
    write_file_atomically(staged, reason + "\n");
    took = link(staged.c_str(), first.c_str()) == 0;
    if (!took && errno == EEXIST) {
      std::error_code ec;
      const auto when = fs::last_write_time(first, ec);
      if (replace_first || (!ec && when < kProcessStarted)) {
        fs::rename(staged, first);
        took = true;
      }
    }
    std::error_code ignored;
    fs::remove(staged, ignored);
  } catch (const std::exception& e) {
    spdlog::error("could not record the failure under {}: {}", sagemaker_root, e.what());
  }
  return took;
}

}  // namespace tandem::report
