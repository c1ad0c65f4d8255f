#include "tandem/report/plan_inputs.h"

#include <fstream>
#include <thread>

namespace tandem::report {
namespace {

nlohmann::json or_null(const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); }

double per_cpu_second(const feed::SourceStats& s) {
  return s.compute_seconds > 0 ? static_cast<double>(s.samples) / s.compute_seconds : 0.0;
}

}  // namespace

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

nlohmann::json throughput(const TrainReport& train) {
  const double training_s = train.wall_seconds - train.paused_seconds;
  const double busy_s = training_s - train.data_wait_seconds;
  const double global = train.samples_per_sec * train.world;
  return {{"global_samples_per_sec", global},
          {"per_rank_samples_per_sec", train.samples_per_sec},
          {"ceiling_samples_per_sec", busy_s > 0 ? train.world * static_cast<double>(train.samples) / busy_s : 0.0}};
}

nlohmann::json plan_inputs(const TrainReport& train, const std::vector<feed::SourceStats>& sources,
                           const std::vector<WorkerFacts>& workers, const std::string& trainer_instance_type,
                           int trainer_hosts, int local_threads) {
  const double training_s = train.wall_seconds - train.paused_seconds;
  nlohmann::json out = {{"trainer_instance_type", or_null(trainer_instance_type)},
                        {"trainer_hosts", trainer_hosts},
                        {"ranks", train.world},
                        {"trainer_host_cores", std::thread::hardware_concurrency()},
                        {"cpu_model", cpu_model()},
                        {"local", nullptr},
                        {"workers", nlohmann::json::array()},
                        {"worker_instance_type", nullptr}};
  for (const auto& s : sources) {
    const double rate = training_s > 0 ? static_cast<double>(s.samples) / training_s : 0.0;
    if (s.name == "local") {
      out["local"] = {{"threads", local_threads}, {"images_per_cpu_second", per_cpu_second(s)}, {"images_per_sec", rate}};
      continue;
    }
    WorkerFacts facts{s.name, "", "", 0};
    for (const auto& w : workers) {
      if (w.address == s.name) facts = w;
    }
    out["workers"].push_back({{"address", s.name},
                              {"host", or_null(facts.host)},
                              {"instance_type", or_null(facts.instance_type)},
                              {"threads", facts.threads},
                              {"images_per_cpu_second", per_cpu_second(s)},
                              {"images_per_sec", rate}});
    if (out["worker_instance_type"].is_null() && !facts.instance_type.empty()) {
      out["worker_instance_type"] = facts.instance_type;
    }
  }
  return out;
}

}  // namespace tandem::report
