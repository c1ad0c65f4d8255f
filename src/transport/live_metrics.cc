#include "tandem/transport/live_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <map>
#include <mutex>
#include <optional>
#include <set>

namespace tandem::transport {
namespace {

using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Registry;

std::optional<double> number(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

Family<Gauge>& gauge(Registry& r, const std::string& name, const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(r);
}

Family<Counter>& counter(Registry& r, const std::string& name, const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(r);
}

// The series of `labels` set to `value`, or gone while the value is not known.
void set(Family<Gauge>& family, const prometheus::Labels& labels, std::optional<double> value) {
  if (value) {
    family.Add(labels).Set(*value);
  } else if (family.Has(labels)) {
    family.Remove(&family.Add(labels));
  }
}

// A counter that follows a total kept elsewhere (it never goes down: a total that
// restarted, as a rejoined worker's does, adds from zero again).
void follow(Counter& c, double total, double& seen) {
  if (total > seen) c.Increment(total - seen);
  seen = total;
}

std::string render(const Registry& r) { return prometheus::TextSerializer().Serialize(r.Collect()); }

}  // namespace

struct TrainerMetrics::Impl {
  std::mutex mu;
  Registry registry;
  Family<Gauge>& step = gauge(registry, "tandem_step", "Steps done at the last log window");
  Family<Gauge>& rate = gauge(registry, "tandem_samples_per_second",
                              "Samples per second over the last log window, every rank");
  Family<Gauge>& wait = gauge(registry, "tandem_data_wait_ratio",
                              "Fraction of the last log window the training loop waited for data");
  Family<Gauge>& in_flight = gauge(registry, "tandem_requests_in_flight",
                                   "Batch requests given to sources and not answered yet");
  Family<Gauge>& workers = gauge(registry, "tandem_workers", "Data workers serving now (not failed, not left)");
  Family<Gauge>& wanted = gauge(registry, "tandem_workers_wanted",
                                "Data workers that would keep the data wait under 5% at the workers' mean capacity "
                                "(no sample until a worker's capacity is known)");
  Family<Gauge>& source_rate = gauge(registry, "tandem_source_samples_per_second",
                                     "Samples per second each serving source delivered in the last log window");
  Family<Gauge>& capacity = gauge(registry, "tandem_worker_capacity_samples_per_second",
                                  "Samples per second each worker can make: samples per CPU-second times its threads");
  Family<Counter>& batches = counter(registry, "tandem_source_batches_total",
                                     "Batches each serving source delivered to this rank's training loop");
  std::set<std::string> serving;   // the sources with series now
  nlohmann::json applied;          // the line whose batches were counted last

  void drop(const std::string& name) {
    const prometheus::Labels l{{"source", name}};
    set(source_rate, l, std::nullopt);
    set(capacity, l, std::nullopt);
    if (batches.Has(l)) batches.Remove(&batches.Add(l));
  }

  void sources(const nlohmann::json& line) {
    const bool fresh = line != applied;
    std::set<std::string> now;
    if (const auto list = line.find("sources"); list != line.end() && list->is_array()) {
      for (const nlohmann::json& s : *list) {
        const std::string name = s.value("name", "");
        if (!s.value("serving", true)) continue;  // failed or left: its series go
        const prometheus::Labels l{{"source", name}};
        now.insert(name);
        set(source_rate, l, number(s, "images_per_sec"));
        set(capacity, l, number(s, "capacity"));
        Counter& c = batches.Add(l);
        if (fresh) c.Increment(number(s, "batches").value_or(0));
      }
    }
    for (const std::string& name : serving) {
      if (!now.count(name)) drop(name);
    }
    serving = std::move(now);
    applied = line;
  }
};

TrainerMetrics::TrainerMetrics() : impl_(std::make_unique<Impl>()) {}
TrainerMetrics::~TrainerMetrics() = default;

std::string TrainerMetrics::page(const nlohmann::json& last, double in_flight) {
  const nlohmann::json line = last.is_object() ? last : nlohmann::json::object();
  std::lock_guard lock(impl_->mu);
  Impl& m = *impl_;
  set(m.step, {}, number(line, "step"));
  set(m.rate, {}, number(line, "samples_per_sec"));
  const std::optional<double> wait = number(line, "data_wait_pct");
  set(m.wait, {}, wait ? std::optional(*wait / 100) : std::nullopt);
  set(m.in_flight, {}, in_flight);
  set(m.workers, {}, number(line, "workers"));
  set(m.wanted, {}, number(line, "workers_wanted"));
  m.sources(line);
  return render(m.registry);
}

struct WorkerMetrics::Impl {
  std::mutex mu;
  Registry registry;
  Family<Gauge>& streams = gauge(registry, "tandem_worker_open_streams", "Batch streams open (one per trainer rank)");
  Family<Gauge>& threads = gauge(registry, "tandem_worker_threads", "Preprocessing threads");
  Family<Gauge>& leaving = gauge(registry, "tandem_worker_leaving",
                                 "1 once the worker is draining (--drain) and leaving the job");
  Counter& batches = counter(registry, "tandem_worker_batches_served_total", "Batches written to trainers").Add({});
  Counter& samples = counter(registry, "tandem_worker_samples_served_total", "Samples written to trainers").Add({});
  double batches_seen = 0, samples_seen = 0;
  // A pool's, per job (label job): what it was served, what was made for it, what it shared.
  Family<Gauge>& job_served = gauge(registry, "tandem_pool_job_samples_served", "Samples a pool served to the job");
  Family<Gauge>& job_made = gauge(registry, "tandem_pool_job_samples_made",
                                  "Samples a pool made for the job (its own requests, asked first by it)");
  Family<Gauge>& job_shared = gauge(registry, "tandem_pool_job_samples_shared",
                                    "Samples a pool served the job from batches made for another job's identical request");
  Family<Gauge>& job_cpu = gauge(registry, "tandem_pool_job_compute_seconds", "CPU-seconds a pool spent on the job");
};

WorkerMetrics::WorkerMetrics() : impl_(std::make_unique<Impl>()) {}
WorkerMetrics::~WorkerMetrics() = default;

std::string WorkerMetrics::page(const WorkerServer::Stats& s) {
  std::lock_guard lock(impl_->mu);
  Impl& m = *impl_;
  set(m.streams, {}, s.open_streams);
  set(m.threads, {}, s.threads);
  set(m.leaving, {}, s.leaving ? 1 : 0);
  follow(m.batches, static_cast<double>(s.batches_served), m.batches_seen);
  follow(m.samples, static_cast<double>(s.samples_served), m.samples_seen);
  for (const auto& [job, t] : s.jobs) {
    set(m.job_served, {{"job", job}}, static_cast<double>(t.samples_served));
    set(m.job_made, {{"job", job}}, static_cast<double>(t.samples_made));
    set(m.job_shared, {{"job", job}}, static_cast<double>(t.samples_shared));
    set(m.job_cpu, {{"job", job}}, t.compute_seconds);
  }
  return render(m.registry);
}

std::unique_ptr<MetricsServer> serve_metrics(int port, const std::string& bind, std::function<std::string()> render) {
  if (port < 0) return nullptr;
  MetricsServerOptions o;
  o.bind = bind;
  o.port = port;
  return std::make_unique<MetricsServer>(o, std::move(render));
}

}  // namespace tandem::transport
