#include "tandem/plan/planner.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tandem/common/error.h"
#include "tandem/common/text.h"
#include "tandem/plan/model.h"
#include "plan_types.h"
#include "spot_plan.h"
#include "sweep_plan.h"

namespace tandem::plan {

namespace {

nlohmann::json money_or_null(bool feasible, double v) { return feasible ? nlohmann::json(v) : nlohmann::json(nullptr); }

// A row; its dollars null where nothing feeds the loop, or where the types have no price.
nlohmann::json row_json(const PlanRow& r, const PlanRow& none, bool priced) {
  return {{"workers", r.workers},
          {"samples_per_sec", r.samples_per_sec},
          {"step_ms", money_or_null(r.feasible, r.step_seconds * 1000.0)},
          {"usd_per_hour", money_or_null(priced, r.usd_per_hour)},
          {"usd_per_1000_steps", money_or_null(priced && r.feasible, r.usd_per_1000_steps)},
          {"usd_per_million_samples", money_or_null(priced && r.feasible, r.usd_per_million_samples)},
          {"saving_vs_none", money_or_null(priced && r.feasible && none.feasible, saving(r, none))},
          {"at_ceiling", r.at_ceiling},
          {"limit", r.limit}};
}

// The trainer hosts' own preprocessing, as rented: the trainer type's vCPUs less what its
// ranks' training loops keep (reserve_vcpus_per_rank each; a rank per GPU, else the
// run's ranks per host), at the per-thread rate measured there, else the workers'. So
// N = 0 is the trainer host alone with every spare core making samples. The run's own
// figure stands in when the type has no vCPU count (a --price type) or the run gave only
// what its hosts made.
// A run that made no samples on its trainer hosts (local threads 0: a Feed without
// local_threads, a trainer host without the data) has no way to use their cores: none are
// counted, and N = 0 is no choice.
struct TrainerCores {
  double per_host = 0.0;  // samples/s
  int spare = 0;          // vCPUs making samples, per host; -1 when the run's figure stood in
  int ranks_per_host = 1;
  bool unused = false;    // the run made nothing on the trainer hosts
};

TrainerCores trainer_cores(const RunMeasurements& m, const InstanceType& trainer, const PlanOptions& o) {
  TrainerCores c;
  c.ranks_per_host = trainer.gpus > 0 ? trainer.gpus : std::max(1, m.ranks / std::max(1, m.trainer_hosts));
  if (m.local_threads_known && m.local_threads == 0 && m.local <= 0) {
    c.unused = true;
    c.spare = -1;  // the run's own figure (none) stands
    return c;
  }
  if (trainer.vcpus <= 0 || m.local_made_only) {
    c.per_host = m.local / m.trainer_hosts;
    c.spare = -1;
    return c;
  }
  c.spare = std::max(0, trainer.vcpus - o.reserve_vcpus_per_rank * c.ranks_per_host);
  c.per_host = c.spare * (m.local_per_thread > 0 ? m.local_per_thread : m.images_per_cpu_second);
  return c;
}

// Samples/s `gbps` carries at `bytes_per_sample`; infinite when either is unknown.
double network_samples(double gbps, double bytes_per_sample) {
  if (gbps <= 0 || bytes_per_sample <= 0) return std::numeric_limits<double>::infinity();
  return gbps * 1e9 / 8.0 / bytes_per_sample;
}

// The plan's "network": bytes per sample, each type's bandwidth and what it carries (null: unknown).
nlohmann::json network_json(const RunMeasurements& m, const ModelParams& mp, const InstanceType& worker,
                            const InstanceType& trainer) {
  auto positive = [](double v) { return v > 0 && std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  return {{"bytes_per_sample", positive(m.bytes_per_sample)},
          {"worker_gbps", positive(worker.network_gbps)},
          {"trainer_gbps", positive(trainer.network_gbps)},
          {"worker_samples_per_sec", positive(mp.worker_network)},
          {"trainer_samples_per_sec", positive(mp.trainer_network)}};
}

// The run beside the model as it ran: its own local threads (not the trainer type's spare
// vCPUs) and its workers.
nlohmann::json run_json(const RunMeasurements& m, ModelParams as_run) {
  as_run.local = m.local;
  return {{"workers", m.run_workers}, {"measured_samples_per_sec", m.run_samples_per_sec},
          {"predicted_samples_per_sec", predicted_throughput(as_run, m.run_workers)}};
}

std::string where_measured(const RunMeasurements& m, const PriceTable& prices) {
  if (!m.rate_from_workers) {
    return "the trainer host's " + counted(m.local_threads, "local thread", "local threads") +
           (m.cpu_model.empty() ? std::string() : " (" + m.cpu_model + ")");
  }
  std::string s = counted(m.rate_threads, "worker thread", "worker threads") + " on " + m.rate_hosts;
  if (m.simulated) {
    // The instance types were labels: every simulated host ran on this machine.
    return s + " (simulated hosts, all on this machine's " + (m.cpu_model.empty() ? "CPU" : m.cpu_model) + ")";
  }
  if (!m.run_worker_type.empty()) {
    s += " (" + m.run_worker_type;
    const auto it = prices.types.find(m.run_worker_type);
    if (it != prices.types.end() && !it->second.cpu.empty()) s += ", " + it->second.cpu;
    s += ")";
  }
  return s;
}

// The per-thread rate comes from CPU time. While the loop waited for data, the workers
// made as much as they could: when that, by the wall clock, is far from what their CPU
// time says, something besides their cores set their pace. "" when they agree or the
// run was not waiting (then the workers had no reason to run flat out).
std::string wall_clock_check(const RunMeasurements& m) {
  if (m.workers_capacity <= 0 || m.workers_made <= 0 || m.data_wait_fraction < 0.1) return "";
  const double ratio = m.workers_made / m.workers_capacity;
  if (ratio >= 0.8 && ratio <= 1.25) return "";
  const std::string numbers = "the workers made " + group_thousands(m.workers_made, 1) + " samples/s while the loop " +
                              "waited for data " + group_thousands(100 * m.data_wait_fraction, 0) +
                              "% of the time, and their threads' CPU time says " +
                              group_thousands(m.workers_capacity, 1);
  return ratio < 0.8 ? "Cross-check: " + numbers + ". Something besides their cores held them back (reading from "
                           "storage, the network, cores shared with other processes): the table, which counts cores "
                           "alone, is optimistic until that is fixed."
                     : "Cross-check: " + numbers + ". Work the CPU time does not see made samples (processes of "
                           "the dataset's own that tandem does not measure): the table is pessimistic.";
}

// A Python dataset's rate depends on how its samples were made (the summary's
// settings.made, run_settings.cc): natively in C++, or by its own Python code.
std::string made_caveat(const nlohmann::json& summary) {
  const nlohmann::json* settings = summary.contains("settings") ? &summary["settings"] : nullptr;
  if (!settings || !settings->contains("made") || !(*settings)["made"].is_string()) return "";
  const std::string made = (*settings)["made"].get<std::string>();
  if (made.rfind("natively", 0) == 0) {
    return "The Python dataset was made " + made + ": the per-thread rate is that, and the plan holds only while "
           "it is (the same transform, --python-native auto); run as Python it needs about 3x the worker cores "
           "(docs/benchmarks.md).";
  }
  if (made == "by its own Python code") {
    return "The Python dataset ran as its own Python code: the per-thread rate is Python's. A torchvision ImageFolder "
           "or tandem.Image dataset tandem makes natively needs about a third of the worker cores (docs/datasets.md).";
  }
  return "";
}

std::string prices_caveat(const PriceTable& prices) {
  return "Prices are indicative on-demand figures from " + prices.origin + " (" + prices.region + ", " + prices.as_of +
         "); check the current ones and override with --price TYPE=DOLLARS or --prices FILE.";
}

std::string nodes_caveat(const PlanTypes& types, double within_pct) {
  std::string names;
  for (const std::string& t : types.unpriced) names += (names.empty() ? "" : ", ") + t;
  std::string s = "No price for " + names + " (a node type of a Slurm or Kubernetes cluster, not a SageMaker instance "
                  "type): the plan counts nodes, recommending the fewest workers within " +
                  group_thousands(within_pct, 0) + "% of the fastest (--within), and prices nothing, spot included. "
                  "To weigh dollars, give each type's price: --prices FILE with {\"instances\": {\"" +
                  types.unpriced.front() + "\": {\"vcpus\": N, \"usd_per_hour\": D}}}, or --price " +
                  types.unpriced.front() + "=D.";
  if (types.worker_vcpus_measured) {
    s += " A " + types.worker.name + " worker is taken to have " + std::to_string(types.worker.vcpus) +
         " vCPUs, the threads the run's workers had; give \"vcpus\" in a --prices file to plan a bigger node.";
  }
  return s;
}

std::vector<std::string> caveats(const RunMeasurements& m, const PriceTable& prices, const PlanTypes& types,
                                 int to_ceiling, const PlanOptions& options) {
  const InstanceType &worker = types.worker, &trainer = types.trainer;
  const int max_workers = options.max_workers;
  std::vector<std::string> out;
  const bool same_type = m.rate_from_workers && m.run_worker_type == worker.name && !m.simulated;
  if (!same_type) {
    out.push_back("The per-thread rate was measured on " + where_measured(m, prices) + ", not on " + worker.name +
                  (worker.cpu.empty() ? std::string() : " (" + worker.cpu + ")") +
                  ": a different CPU generation is a different rate. Run one job with a " + worker.name +
                  " worker and plan from its summary to confirm.");
  } else {
    out.push_back("The per-thread rate was measured on " + where_measured(m, prices) +
                  "; a different CPU generation (another instance family) is a different rate.");
  }
  if (m.simulated) {
    out.push_back("This run was a simulation (tandem simulate): its hosts shared one machine, so its instance types "
                  "are labels and its rates are this machine's, not those instances'.");
  }
  out.push_back(types.priced ? prices_caveat(prices) : nodes_caveat(types, options.within_pct));
  out.push_back("The model assumes the training loop's own speed (the ceiling) does not change with more workers, "
                "and that a worker's rate grows with its vCPUs.");
  if (m.bytes_per_sample <= 0 || worker.network_gbps <= 0 || trainer.network_gbps <= 0) {
    out.push_back(std::string("The network is not modelled: ") +
                  (m.bytes_per_sample <= 0 ? "the summary does not say how many bytes a sample carries (re-run the "
                                             "job with this version)"
                                           : "the price table gives no network_gbps for " +
                                                 (worker.network_gbps <= 0 ? worker.name : trainer.name)) +
                  ", so the table assumes the network carries every batch.");
  }
  if (const std::string wall = wall_clock_check(m); !wall.empty()) out.push_back(wall);
  if (to_ceiling < 0 || to_ceiling > max_workers) {
    out.push_back("The ceiling is not reached with " + std::to_string(max_workers) +
                  " workers: the table stops there (--max-workers).");
  }
  return out;
}

// What the network does to the plan, in a sentence ("" when it limits nothing).
std::string network_sentence(const nlohmann::json& p, const InstanceType& worker, const InstanceType& trainer) {
  const nlohmann::json& net = p["network"];
  if (net["bytes_per_sample"].is_null()) return "";
  const double bytes = net["bytes_per_sample"].get<double>();
  const double per_worker = p["worker"]["samples_per_sec"].get<double>();
  std::string s;
  if (!net["worker_samples_per_sec"].is_null() && net["worker_samples_per_sec"].get<double>() < per_worker) {
    s += " At " + group_thousands(bytes / 1024.0, 1) + " KiB per sample a " + worker.name + "'s network (" +
         group_thousands(net["worker_gbps"].get<double>(), 1) + " Gbit/s) carries only " +
         group_thousands(net["worker_samples_per_sec"].get<double>(), 0) + " of the " + group_thousands(per_worker, 0) +
         " samples/s its cores make: the network, not the cores, limits each worker.";
  }
  for (const nlohmann::json& r : p["rows"]) {
    if (r["limit"] == "trainer network") {
      s += " From " + counted(r["workers"].get<int>(), "worker", "workers") + " on, the " + trainer.name +
           "'s network (" + group_thousands(net["trainer_gbps"].get<double>(), 1) + " Gbit/s, " +
           group_thousands(net["trainer_samples_per_sec"].get<double>(), 0) +
           " samples/s) limits what more workers add.";
      break;
    }
  }
  return s;
}

// The trainer hosts alone: what their own cores make against what the loop takes.
std::string alone_sentence(const nlohmann::json& p, const RunMeasurements& m) {
  const double local = p["local_samples_per_sec"].get<double>();
  std::string s = "With " + std::to_string(m.trainer_hosts) + " x " + m.trainer_type + " alone, ";
  if (local <= 0 && m.local_threads_known && m.local_threads == 0) {
    return s + "nothing preprocesses on the trainer hosts: the run made no samples there (a tandem.Feed without "
               "local_threads, or a trainer host without the data), so the job needs at least one data worker. To "
               "count their spare vCPUs, give the trainer hosts the data and set local_threads (tandem.Feed) or "
               "--local-workers, and plan from that run.";
  }
  if (local <= 0) return s + "nothing preprocesses on the trainer hosts (no vCPUs to spare), so the job needs at least one data worker.";
  const nlohmann::json& spare = p["trainer"]["spare_vcpus_per_host"];
  s += "its own preprocessing" +
       (spare.is_null() ? std::string() : " (" + std::to_string(spare.get<int>()) + " spare vCPUs per host)") +
       " makes about " + group_thousands(local, 0) + " samples/s while the training loop could take " +
       group_thousands(m.ceiling, 0) + " samples/s";
  return s + (local >= m.ceiling ? ": the loop is already the bottleneck, so data workers would add cost and no speed."
                                 : ", so the accelerators wait for data " +
                                       group_thousands(100.0 * (1.0 - local / m.ceiling), 0) + "% of the time.");
}

// The cheapest choice and the fastest within --within of its cost.
std::string cost_sentences(const nlohmann::json& p) {
  const nlohmann::json &best = p["recommended"], &none = p["rows"][0], &fast = p["fastest_within"];
  const int n = best["workers"].get<int>();
  std::string s = " The cheapest per sample is " + (n == 0 ? std::string("none") : counted(n, "worker", "workers")) + ": $" +
                  group_thousands(best["usd_per_1000_steps"].get<double>(), 3) + " per 1,000 steps at " +
                  group_thousands(best["step_ms"].get<double>(), 1) + " ms/step";
  if (n > 0 && !none["saving_vs_none"].is_null() && best["saving_vs_none"].get<double>() > 0) {
    s += ", " + group_thousands(100.0 * best["saving_vs_none"].get<double>(), 0) + "% less than with none";
  }
  s += ".";
  if (!p["workers_to_ceiling"].is_null() && p["workers_to_ceiling"].get<int>() <= n) {
    s += " There the training loop runs at its ceiling: more workers add cost and no speed.";
  } else if (n > 0) {
    s += " Beyond it each worker costs more than the speed it adds is worth.";
  } else {
    s += " A worker costs more per hour than the speed it adds is worth here.";
  }
  if (fast["workers"] != best["workers"]) {
    s += " For at most " + group_thousands(fast["within_pct"].get<double>(), 0) + "% more per sample, " +
         counted(fast["workers"].get<int>(), "worker makes", "workers make") + " it " +
         group_thousands(best["step_ms"].get<double>() / fast["step_ms"].get<double>(), 2) + " times as fast.";
  }
  return s;
}

// Without prices: the fewest workers near the fastest the job can go.
std::string node_sentences(const nlohmann::json& p) {
  const nlohmann::json &best = p["recommended"], &fast = p["fastest_within"];
  const int n = best["workers"].get<int>();
  std::string s = " No price is known for " + p["unpriced_types"].get<std::vector<std::string>>().front() +
                  (p["unpriced_types"].size() > 1 ? " or " + p["unpriced_types"][1].get<std::string>() : std::string()) +
                  ", so the plan counts nodes: " + (n == 0 ? std::string("no worker") : counted(n, "worker", "workers")) +
                  " bring the job within " + group_thousands(fast["within_pct"].get<double>(), 0) +
                  "% of the fastest it can go (" + group_thousands(best["samples_per_sec"].get<double>(), 0) +
                  " samples/s, " + group_thousands(best["step_ms"].get<double>(), 1) + " ms/step)";
  if (fast["workers"] != best["workers"]) {
    s += "; " + counted(fast["workers"].get<int>(), "worker makes", "workers make") + " it " +
         group_thousands(best["step_ms"].get<double>() / fast["step_ms"].get<double>(), 2) + " times as fast as that";
  }
  return s + ".";
}

std::string explanation(const nlohmann::json& p, const RunMeasurements& m, const PlanTypes& types) {
  const InstanceType &worker = types.worker, &trainer = types.trainer;
  std::string s = alone_sentence(p, m);
  s += " Each " + worker.name + " adds about " + group_thousands(m.images_per_cpu_second * worker.vcpus, 0) +
       " samples/s (" + group_thousands(m.images_per_cpu_second, 1) + " samples per CPU-second x " +
       std::to_string(worker.vcpus) + " vCPUs" + (types.worker_vcpus_measured ? ", the threads of the run's workers" : "") +
       ")" + (types.priced ? " for $" + group_thousands(worker.usd_per_hour, 3) + "/hour." : ".");
  s += network_sentence(p, worker, trainer);
  return s + (types.priced ? cost_sentences(p) : node_sentences(p));
}

// The model's inputs for the whole job.
ModelParams model_params(const RunMeasurements& m, const TrainerCores& cores, const PlanTypes& types) {
  ModelParams mp;
  mp.ceiling = m.ceiling;
  mp.local = cores.per_host * m.trainer_hosts;
  mp.per_worker = m.images_per_cpu_second * types.worker.vcpus;
  mp.worker_network = network_samples(types.worker.network_gbps, m.bytes_per_sample);
  mp.trainer_network = network_samples(types.trainer.network_gbps * m.trainer_hosts, m.bytes_per_sample);
  mp.global_batch = m.global_batch;
  mp.trainer_usd_per_hour = types.priced ? types.trainer.usd_per_hour * m.trainer_hosts : 0.0;
  mp.worker_usd_per_hour = types.priced ? types.worker.usd_per_hour : 0.0;
  return mp;
}

// What the plan was made from: the types, the measurement, the prices, the network.
nlohmann::json inputs_json(const RunMeasurements& m, const PlanTypes& types, const TrainerCores& cores,
                           const ModelParams& mp, const PriceTable& prices, const PlanOptions& options) {
  const InstanceType &trainer = types.trainer, &worker = types.worker;
  auto usd = [&](const InstanceType& t) { return money_or_null(types.priced, t.usd_per_hour); };
  nlohmann::json p;
  p["trainer"] = {{"instance_type", trainer.name}, {"hosts", m.trainer_hosts}, {"usd_per_hour", usd(trainer)},
                  {"cpu_model", m.cpu_model}, {"local_threads_per_host", m.local_threads},
                  {"vcpus", trainer.vcpus}, {"ranks_per_host", cores.ranks_per_host},
                  {"spare_vcpus_per_host", cores.spare >= 0 ? nlohmann::json(cores.spare) : nlohmann::json(nullptr)},
                  {"reserve_vcpus_per_rank", options.reserve_vcpus_per_rank}};
  p["worker"] = {{"instance_type", worker.name}, {"vcpus", worker.vcpus}, {"usd_per_hour", usd(worker)},
                 {"cpu", worker.cpu}, {"samples_per_sec", mp.per_worker}, {"vcpus_measured", types.worker_vcpus_measured}};
  p["measurement"] = {{"images_per_cpu_second", m.images_per_cpu_second}, {"threads", m.rate_threads},
                      {"on", m.rate_from_workers ? "workers" : "trainer host"}, {"where", where_measured(m, prices)},
                      {"run_worker_type", m.run_worker_type}, {"cpu_model", m.cpu_model}};
  p["prices"] = {{"file", prices.origin}, {"region", prices.region}, {"as_of", prices.as_of},
                 {"currency", prices.currency}, {"overridden", prices.overridden}};
  p["priced"] = types.priced;
  p["unpriced_types"] = types.unpriced;
  p["network"] = network_json(m, mp, worker, trainer);
  p["ceiling_samples_per_sec"] = m.ceiling;
  p["local_samples_per_sec"] = mp.local;
  p["global_batch"] = m.global_batch;
  return p;
}

// The rows, the recommendation, the fastest choice within --within and the elastic range:
// by cost per sample when priced, else by nodes.
void choose(nlohmann::json& p, const std::vector<PlanRow>& rows, double within_pct, bool priced) {
  p["rows"] = nlohmann::json::array();
  for (const PlanRow& r : rows) p["rows"].push_back(row_json(r, rows[0], priced));
  const int best = priced ? cheapest_row(rows) : fewest_near_fastest(rows, within_pct);
  if (best < 0) throw ConfigError("no choice of workers feeds the training loop: the measured rates are 0");
  const int fast = priced ? fastest_row_within(rows, within_pct) : fastest_row(rows);
  p["recommended"] = p["rows"][best];
  p["fastest_within"] = p["rows"][fast];
  p["fastest_within"]["within_pct"] = within_pct;
  const ScalingRange range = priced ? scaling_range(rows, within_pct) : node_range(rows, within_pct);
  p["elastic"] = {{"start", range.start}, {"min", range.min}, {"max", range.max}, {"within_pct", within_pct}};
}

}  // namespace

nlohmann::json make_plan(const nlohmann::json& summary, const PriceTable& prices, const PlanOptions& options) {
  if (!(options.within_pct >= 0) || options.within_pct > 1000) throw ConfigError("--within must be 0 to 1000 (percent)");
  if (options.max_workers < 1 || options.max_workers > 10000) throw ConfigError("--max-workers must be 1 to 10000");
  if (options.sweep_jobs < 0 || options.sweep_jobs > 10000) throw ConfigError("--sweep-jobs must be 0 to 10000");
  const RunMeasurements m = read_measurements(summary, options);
  const PlanTypes types = plan_types(prices, m);
  const TrainerCores cores = trainer_cores(m, types.trainer, options);
  const ModelParams mp = model_params(m, cores, types);
  const std::vector<PlanRow> rows = plan_table(mp, options.max_workers);
  const int to_ceiling = workers_to_ceiling(mp);

  nlohmann::json p = inputs_json(m, types, cores, mp, prices, options);
  p["workers_to_ceiling"] = to_ceiling >= 0 ? nlohmann::json(to_ceiling) : nlohmann::json(nullptr);
  choose(p, rows, options.within_pct, types.priced);
  if (cores.unused) {
    p["rows"][0]["limit"] = "no data source: the run made no samples on the trainer hosts (set local_threads or "
                            "--local-workers, with the data there)";
  }
  if (m.rate_from_workers && m.run_worker_type == types.worker.name && m.run_samples_per_sec > 0) p["run"] = run_json(m, mp);
  p["explanation"] = explanation(p, m, types);
  p["caveats"] = caveats(m, prices, types, to_ceiling, options);
  if (const std::string made = made_caveat(summary); !made.empty()) p["caveats"].push_back(made);
  if (options.sweep_jobs > 0) p["sweep"] = sweep_section(mp, p["recommended"], options.sweep_jobs, types.priced);
  if (types.priced) {  // spot is a discount on a price
    const SpotInputs spot = spot_inputs(m, prices, types.trainer, types.worker);
    p["spot"] = spot_section(spot, mp, rows, cheapest_row(rows));
    p["caveats"].push_back(spot_caveat(spot));
  }
  return p;
}

}  // namespace tandem::plan
