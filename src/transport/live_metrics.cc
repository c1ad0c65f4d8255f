#include "tandem/transport/live_metrics.h"

#include <cmath>
#include <limits>

namespace tandem::transport {
namespace {


double number(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : std::numeric_limits<double>::quiet_NaN();
}

Gauge one(std::string name, std::string help, double value) { return {std::move(name), std::move(help), {{"", value}}}; }

}  // namespace

std::string trainer_metrics(const nlohmann::json& last, double in_flight) {
  const nlohmann::json line = last.is_object() ? last : nlohmann::json::object();
  std::vector<Gauge> g = {
      one("tandem_step", "Steps done at the last log window", number(line, "step")),
      one("tandem_samples_per_second", "Samples per second over the last log window, every rank",
          number(line, "samples_per_sec")),
      one("tandem_data_wait_ratio", "Fraction of the last log window the training loop waited for data",
          number(line, "data_wait_pct") / 100),
      one("tandem_requests_in_flight", "Batch requests given to sources and not answered yet",
          in_flight),
      one("tandem_workers", "Data workers serving now (not failed, not left)", number(line, "workers")),
      one("tandem_workers_wanted",
          "Data workers that would keep the data wait under 5% at the workers' mean capacity (NaN: not known yet)",
          number(line, "workers_wanted"))};
  Gauge rate{"tandem_source_samples_per_second", "Samples per second each source delivered in the last log window", {}};
  Gauge capacity{"tandem_worker_capacity_samples_per_second",
                 "Samples per second each worker can make: samples per CPU-second times its threads", {}};
  if (const auto sources = line.find("sources"); sources != line.end() && sources->is_array()) {
    for (const nlohmann::json& s : *sources) {
      const std::string who = label("source", s.value("name", ""));
      rate.samples.emplace_back(who, number(s, "images_per_sec"));
      if (s.contains("capacity")) capacity.samples.emplace_back(who, number(s, "capacity"));
    }
  }
  g.push_back(std::move(rate));
  g.push_back(std::move(capacity));
  return prometheus_text(g);
}

std::string worker_metrics(const WorkerServer::Stats& s) {
  std::vector<Gauge> g = {
      one("tandem_worker_open_streams", "Batch streams open (one per trainer rank)", s.open_streams),
      one("tandem_worker_threads", "Preprocessing threads", s.threads),
      one("tandem_worker_leaving", "1 once the worker is draining (--drain) and leaving the job", s.leaving ? 1 : 0)};
  g.push_back({"tandem_worker_batches_served_total", "Batches written to trainers",
               {{"", static_cast<double>(s.batches_served)}}, "counter"});
  g.push_back({"tandem_worker_samples_served_total", "Samples written to trainers",
               {{"", static_cast<double>(s.samples_served)}}, "counter"});
  return prometheus_text(g);
}

std::unique_ptr<MetricsServer> serve_metrics(int port, std::function<std::string()> render) {
  if (port < 0) return nullptr;
  return std::make_unique<MetricsServer>("0.0.0.0", port, std::move(render));
}

}  // namespace tandem::transport
