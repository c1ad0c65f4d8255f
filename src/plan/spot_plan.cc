// The plan's spot section: for no workers and the recommended count, what the job costs
// and takes on spot (a SageMaker job restarts whole at any interruption) beside on-demand,
// how often to checkpoint, and a spot CPU group beside an on-demand GPU group (Kubernetes,
// Slurm: stateless workers interrupted apart).
#include "spot_plan.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "tandem/plan/spot.h"

namespace tandem::plan {
namespace {

// What the plan assumes when the run did not measure it.
constexpr double kAssumedCheckpointSeconds = 30.0;
constexpr double kAssumedStartupSeconds = 60.0;

nlohmann::json whole_job(const SpotInputs& in, const PlanRow& row) {
  const int n = row.workers;
  const double lambda = in.hosts * spot_interruptions_per_hour(in.prices, in.trainer) +
                        n * spot_interruptions_per_hour(in.prices, in.worker);
  const SpotJob job{lambda, in.checkpoint_seconds, in.restart_seconds};
  const double interval = checkpoint_interval_seconds(job), factor = spot_time_factor(job, interval);
  const double usd_per_hour = in.hosts * in.trainer.usd_per_hour * (1 - spot_discount(in.prices, in.trainer)) +
                              n * in.worker.usd_per_hour * (1 - spot_discount(in.prices, in.worker));
  const double step_s = row.step_seconds * factor;
  const double spot = usd_per_hour / 3600.0 * 1000.0 * step_s;
  nlohmann::json j = {{"workers", n},
                      {"interruptions_per_day", lambda * 24},
                      {"on_demand_usd_per_1000_steps", row.usd_per_1000_steps},
                      {"on_demand_step_ms", row.step_seconds * 1000},
                      {"spot_usd_per_1000_steps", spot},
                      {"spot_step_ms", step_s * 1000},
                      {"saving_vs_on_demand", 1 - spot / row.usd_per_1000_steps},
                      {"checkpoint_every_seconds", nullptr},
                      {"checkpoint_every_steps", nullptr}};
  if (std::isfinite(interval)) {
    j["checkpoint_every_seconds"] = interval;
    j["checkpoint_every_steps"] = std::max<int64_t>(1, std::llround(interval / row.step_seconds));
  }
  return j;
}

nlohmann::json split_groups(const SpotInputs& in, const ModelParams& mp, const PlanRow& row) {
  const int n = row.workers;
  const double away = absent_share(spot_interruptions_per_hour(in.prices, in.worker), in.prices.spot.provision_seconds);
  const double rate = predicted_throughput(mp, n * (1 - away));
  const double usd_per_hour = in.hosts * in.trainer.usd_per_hour +
                              n * in.worker.usd_per_hour * (1 - spot_discount(in.prices, in.worker));
  const double step_s = mp.global_batch / rate;
  const double cost = usd_per_hour / 3600.0 * 1000.0 * step_s;
  return {{"workers", n},
          {"worker_away_share", away},
          {"usd_per_1000_steps", cost},
          {"step_ms", step_s * 1000},
          {"saving_vs_on_demand", 1 - cost / row.usd_per_1000_steps}};
}

}  // namespace

SpotInputs spot_inputs(const RunMeasurements& m, const PriceTable& prices, const InstanceType& trainer,
                       const InstanceType& worker) {
  SpotInputs in{prices, trainer, worker, m.trainer_hosts};
  in.checkpoint_measured = m.checkpoint_seconds > 0;
  in.startup_measured = m.startup_seconds > 0;
  in.checkpoint_seconds = in.checkpoint_measured ? m.checkpoint_seconds : kAssumedCheckpointSeconds;
  const double startup = in.startup_measured ? m.startup_seconds : kAssumedStartupSeconds;
  in.restart_seconds = prices.spot.provision_seconds + startup;
  return in;
}

nlohmann::json spot_section(const SpotInputs& in, const ModelParams& mp, const std::vector<PlanRow>& rows, int best) {
  nlohmann::json s = {{"checkpoint_seconds", in.checkpoint_seconds},
                      {"checkpoint_measured", in.checkpoint_measured},
                      {"restart_seconds", in.restart_seconds},
                      {"startup_measured", in.startup_measured},
                      {"provision_seconds", in.prices.spot.provision_seconds},
                      {"trainer_discount", spot_discount(in.prices, in.trainer)},
                      {"worker_discount", spot_discount(in.prices, in.worker)},
                      {"whole_job", nlohmann::json::array()},
                      {"spot_workers_on_demand_trainer", nullptr}};
  for (const int i : {0, best}) {
    if (i < 0 || !rows[i].feasible || (i == best && best == 0 && !s["whole_job"].empty())) continue;
    s["whole_job"].push_back(whole_job(in, rows[i]));
  }
  if (best > 0 && rows[best].feasible) s["spot_workers_on_demand_trainer"] = split_groups(in, mp, rows[best]);
  return s;
}

std::string spot_caveat(const SpotInputs& in) {
  std::string s = "Spot: the discounts and interruption rates are the price table's (" + in.prices.origin +
                  "; copy your region's from AWS's Spot Instance Advisor), and a replacement instance is assumed "
                  "to take " + fmt::format("{:.0f}", in.prices.spot.provision_seconds) + " s to start. ";
  s += in.checkpoint_measured ? fmt::format("A checkpoint took {:.1f} s in this run", in.checkpoint_seconds)
                              : fmt::format("No checkpoint was written in this run, so one is assumed to take {:.0f} s "
                                            "(run with --checkpoint-every N to measure it)", in.checkpoint_seconds);
  s += in.startup_measured ? fmt::format("; start-up to the first step took {:.1f} s.",
                                         in.restart_seconds - in.prices.spot.provision_seconds)
                           : fmt::format("; start-up is assumed to take {:.0f} s.", kAssumedStartupSeconds);
  return s;
}

}  // namespace tandem::plan
