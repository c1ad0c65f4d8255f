// format_plan_text: the plan for a terminal.
#include <cmath>
#include <cstdio>
#include <sstream>

#include "tandem/common/text.h"
#include "tandem/plan/planner.h"

#include "sweep_plan.h"

namespace tandem::plan {

namespace {

constexpr size_t kWidth = 92;

// Words of `text` in lines of at most kWidth characters, each starting with `indent`.
std::string wrap(const std::string& text, const std::string& indent, const std::string& first_indent) {
  std::istringstream words(text);
  std::string word, line = first_indent, out;
  bool empty = true;
  while (words >> word) {
    if (!empty && line.size() + 1 + word.size() > kWidth) {
      out += line + "\n";
      line = indent;
      empty = true;
    }
    line += (empty ? "" : " ") + word;
    empty = false;
  }
  return out + line + "\n";
}

std::string pad_left(const std::string& s, size_t width) { return s.size() >= width ? s : std::string(width - s.size(), ' ') + s; }

std::string pad_right(const std::string& s, size_t width) { return s.size() >= width ? s : s + std::string(width - s.size(), ' '); }

std::string number_or_dash(const nlohmann::json& v, int decimals) {
  return v.is_number() ? group_thousands(v.get<double>(), decimals) : "-";
}

std::string percent_or_dash(const nlohmann::json& v) {
  return v.is_number() ? group_thousands(100.0 * v.get<double>(), 0) + "%" : "-";
}

std::string table(const nlohmann::json& p) {
  const int best = p["recommended"]["workers"].get<int>(), fast = p["fastest_within"]["workers"].get<int>();
  const bool priced = p.value("priced", true);
  const int columns = priced ? 6 : 3;  // without prices: no dollar columns
  const size_t widths[] = {7, 12, 10, 10, 12, 8};
  const char* heads[] = {"workers", "samples/s", "ms/step", "$/hour", "$/1k steps", "saving"};
  std::string out = "  ";
  for (int i = 0; i < columns; ++i) out += pad_left(heads[i], widths[i]) + (i < columns - 1 ? "  " : "");
  out += "\n";
  for (const nlohmann::json& r : p["rows"]) {
    const int n = r["workers"].get<int>();
    const std::string cells[] = {std::to_string(n), group_thousands(r["samples_per_sec"].get<double>(), 0),
                                 number_or_dash(r["step_ms"], 1), number_or_dash(r["usd_per_hour"], 2),
                                 number_or_dash(r["usd_per_1000_steps"], 3), n == 0 ? "-" : percent_or_dash(r["saving_vs_none"])};
    std::string line = "  ";
    for (int i = 0; i < columns; ++i) line += pad_left(cells[i], widths[i]) + (i < columns - 1 ? "  " : "");
    std::string marks;
    if (n == best) marks += priced ? " cheapest" : " recommended";
    if (n == fast && fast != best) {
      marks += priced ? " fastest within " + group_thousands(p["fastest_within"]["within_pct"].get<double>(), 0) + "%" : " fastest";
    }
    if (r["at_ceiling"].get<bool>()) marks += (marks.empty() ? " " : ", ") + std::string("at ceiling");
    const std::string limit = r.value("limit", "");
    if (limit.find("network") != std::string::npos) marks += (marks.empty() ? " " : ", ") + limit + " bound";
    out += line + (marks.empty() ? "" : "  <-" + marks) + "\n";
  }
  return out;
}

std::string inputs(const nlohmann::json& p) {
  const nlohmann::json &t = p["trainer"], &w = p["worker"], &m = p["measurement"];
  const std::string wt = printable(w["instance_type"].get<std::string>(), 60);
  auto price = [](const nlohmann::json& usd) { return usd.is_number() ? "$" + group_thousands(usd.get<double>(), 3) + "/h" : std::string(); };
  const std::string trainer_price = price(t["usd_per_hour"]), worker_price = price(w["usd_per_hour"]);
  std::string out = "Plan for " + std::to_string(t["hosts"].get<int>()) + " x " +
                    printable(t["instance_type"].get<std::string>(), 60) +
                    (trainer_price.empty() ? "" : " (" + trainer_price + ")") + " + N x " + wt + " (" +
                    (worker_price.empty() ? "" : worker_price + ", ") + std::to_string(w["vcpus"].get<int>()) + " vCPUs" +
                    (w.value("vcpus_measured", false) ? ", as the run's workers" : "") + ")\n";
  auto item = [&](const std::string& name, const std::string& value) {
    out += wrap(value, std::string(26, ' '), "  " + pad_right(name, 22) + "  ");
  };
  item("training loop ceiling", group_thousands(p["ceiling_samples_per_sec"].get<double>(), 0) +
                                    " samples/s (global batch " + group_thousands(p["global_batch"].get<double>(), 0) + ")");
  const nlohmann::json& spare = t["spare_vcpus_per_host"];
  item("local preprocessing",
       group_thousands(p["local_samples_per_sec"].get<double>(), 0) + " samples/s (" +
           (spare.is_number()
                ? std::to_string(spare.get<int>()) + " spare vCPUs per trainer host: " +
                      std::to_string(t["vcpus"].get<int>()) + " less " +
                      std::to_string(t["reserve_vcpus_per_rank"].get<int>()) + " for each of " +
                      counted(t["ranks_per_host"].get<int>(), "rank", "ranks") + ", --reserve-per-rank)"
                : std::to_string(t["local_threads_per_host"].get<int>()) +
                      (t["local_threads_per_host"].get<int>() == 1 ? " thread" : " threads") + " per trainer host, as run)"));
  item("one " + wt, group_thousands(w["samples_per_sec"].get<double>(), 0) + " samples/s = " +
                        group_thousands(m["images_per_cpu_second"].get<double>(), 1) + " samples per CPU-second x " +
                        std::to_string(w["vcpus"].get<int>()) + " vCPUs; the rate was measured on " +
                        printable(m["where"].get<std::string>(), 300));
  if (p.contains("run")) {
    const nlohmann::json& r = p["run"];
    item("the run", std::to_string(r["workers"].get<int>()) + " x " + wt + ": measured " +
                        group_thousands(r["measured_samples_per_sec"].get<double>(), 0) + " samples/s, the model gives " +
                        group_thousands(r["predicted_samples_per_sec"].get<double>(), 0));
  }
  const nlohmann::json& net = p["network"];
  if (net["bytes_per_sample"].is_number()) {
    auto carried = [](const nlohmann::json& gbps, const nlohmann::json& samples) {
      return gbps.is_number() ? group_thousands(gbps.get<double>(), 1) + " Gbit/s = " +
                                    group_thousands(samples.get<double>(), 0) + " samples/s"
                              : std::string("unknown");
    };
    item("network", group_thousands(net["bytes_per_sample"].get<double>(), 0) + " bytes per sample; a worker's NIC " +
                        carried(net["worker_gbps"], net["worker_samples_per_sec"]) + ", the trainer hosts' " +
                        carried(net["trainer_gbps"], net["trainer_samples_per_sec"]));
  }
  const nlohmann::json& pr = p["prices"];
  if (!p.value("priced", true)) {
    std::string names;
    for (const auto& n : p["unpriced_types"]) names += (names.empty() ? "" : ", ") + printable(n.get<std::string>(), 60);
    item("prices", "none for " + names + ": the plan counts nodes");
    return out;
  }
  item("prices", printable(pr["file"].get<std::string>(), 300) + " (" + pr["region"].get<std::string>() + ", " +
                     pr["as_of"].get<std::string>() + "), indicative");
  return out;
}

// On spot: each choice beside on-demand, the checkpoint interval, and a spot CPU group.
std::string spot_text(const nlohmann::json& p) {
  if (!p.contains("spot")) return "";
  const nlohmann::json& s = p["spot"];
  std::string out = "On spot (the whole job restarts from its last checkpoint at any interruption):\n";
  for (const nlohmann::json& j : s["whole_job"]) {
    std::string line = std::to_string(j["workers"].get<int>()) + " workers: $" +
                       group_thousands(j["spot_usd_per_1000_steps"].get<double>(), 3) + " per 1,000 steps at " +
                       group_thousands(j["spot_step_ms"].get<double>(), 1) + " ms/step (on-demand $" +
                       group_thousands(j["on_demand_usd_per_1000_steps"].get<double>(), 3) + " at " +
                       group_thousands(j["on_demand_step_ms"].get<double>(), 1) + " ms/step; " +
                       group_thousands(100 * j["saving_vs_on_demand"].get<double>(), 0) + "% less), " +
                       group_thousands(j["interruptions_per_day"].get<double>(), 2) + " interruptions a day";
    if (j["checkpoint_every_steps"].is_number()) {
      line += "; checkpoint every " + group_thousands(j["checkpoint_every_steps"].get<double>(), 0) + " steps (" +
              group_thousands(j["checkpoint_every_seconds"].get<double>() / 60, 1) +
              " min, --checkpoint-every auto)";
    }
    out += wrap(line + ".", "    ", "  - ");
  }
  if (s["spot_workers_on_demand_trainer"].is_object()) {
    const nlohmann::json& g = s["spot_workers_on_demand_trainer"];
    out += wrap("Spot data workers beside an on-demand trainer group (Kubernetes, Slurm: the workers hold no "
                "state, so an interruption costs only a worker's absence, " +
                    group_thousands(100 * g["worker_away_share"].get<double>(), 2) + "% of the time): $" +
                    group_thousands(g["usd_per_1000_steps"].get<double>(), 3) + " per 1,000 steps at " +
                    group_thousands(g["step_ms"].get<double>(), 1) + " ms/step, " +
                    group_thousands(100 * g["saving_vs_on_demand"].get<double>(), 0) + "% less than on-demand.",
                "    ", "  - ");
  }
  return out;
}

// The range of an elastic pool (plan/model.h, ScalingRange), in a line.
std::string elastic_text(const nlohmann::json& p, const std::string& worker_type) {
  const nlohmann::json& e = p["elastic"];
  const int start = e["start"].get<int>(), lo = e["min"].get<int>(), hi = e["max"].get<int>();
  const std::string within = group_thousands(e["within_pct"].get<double>(), 0) + "%";
  const bool priced = p.value("priced", true);
  if (lo == hi) {
    return "Elastic pool: keep " + std::to_string(start) + " x " + worker_type + " (no other count is within " + within +
           (priced ? " of the cheapest cost per sample)\n" : " of the fastest)\n");
  }
  return "Elastic pool: start with " + std::to_string(start) + " x " + worker_type + ", let an autoscaler move it " +
         "between " + std::to_string(lo) + " and " + std::to_string(hi) +
         (priced ? " (each within " + within + " of the cheapest cost per sample" : " (from the fewest within " + within +
                                                                                       " of the fastest to the fastest") +
         "; tandem_workers_wanted, docs/platforms.md)\n";
}

}  // namespace

std::string group_thousands(double n, int decimals) {
  if (!std::isfinite(n)) return std::isnan(n) ? "nan" : (n > 0 ? "inf" : "-inf");
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, std::fabs(n));
  std::string s(buf);
  const size_t point = s.find('.') == std::string::npos ? s.size() : s.find('.');
  std::string whole;
  for (size_t i = 0; i < point; ++i) {
    if (i > 0 && (point - i) % 3 == 0) whole += ',';
    whole += s[i];
  }
  const bool negative = n < 0 && whole.find_first_not_of("0,") != std::string::npos;
  return (negative ? "-" : "") + whole + s.substr(point);
}

std::string format_plan_text(const nlohmann::json& p) {
  std::string out = inputs(p) + "\n" + table(p) + "\n";
  const nlohmann::json &best = p["recommended"], &fast = p["fastest_within"];
  const std::string wt = printable(p["worker"]["instance_type"].get<std::string>(), 60);
  const std::string within = group_thousands(fast["within_pct"].get<double>(), 0) + "%";
  if (p.value("priced", true)) {
    out += "Recommended: " + std::to_string(best["workers"].get<int>()) + " x " + wt + " (cheapest per sample: $" +
           number_or_dash(best["usd_per_1000_steps"], 3) + " per 1,000 steps, " +
           group_thousands(best["samples_per_sec"].get<double>(), 0) + " samples/s)\n";
    out += "Fastest within " + within + " of that cost: " + std::to_string(fast["workers"].get<int>()) + " x " + wt + " (" +
           group_thousands(fast["samples_per_sec"].get<double>(), 0) + " samples/s, $" +
           number_or_dash(fast["usd_per_1000_steps"], 3) + " per 1,000 steps)\n";
  } else {
    out += "Recommended: " + std::to_string(best["workers"].get<int>()) + " x " + wt + " (the fewest within " + within +
           " of the fastest: " + group_thousands(best["samples_per_sec"].get<double>(), 0) + " samples/s)\n";
    out += "Fastest: " + std::to_string(fast["workers"].get<int>()) + " x " + wt + " (" +
           group_thousands(fast["samples_per_sec"].get<double>(), 0) + " samples/s)\n";
  }
  out += elastic_text(p, wt) + "\n";
  out += wrap(printable(p["explanation"].get<std::string>(), 4000), "", "") + "\n" + spot_text(p);
  if (const std::string sweep = sweep_text(p); !sweep.empty()) out += "\n" + wrap(printable(sweep, 4000), "", "");
  out += "\nCaveats:\n";
  for (const nlohmann::json& c : p["caveats"]) out += wrap(printable(c.get<std::string>(), 2000), "  ", "- ");
  return out;
}

}  // namespace tandem::plan
