#include "metrics_charts.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tandem/report/svg_chart.h"

namespace tandem::report {

namespace {

constexpr const char* kPhases[] = {"data_wait", "host_to_device", "forward_backward", "communication", "optimizer"};
constexpr const char* kPhaseNames[] = {"data wait", "host to device", "forward + backward", "communication", "optimizer"};

std::string figure(const std::string& title, const std::string& body) {
  return "<figure><figcaption>" + html_escape(title) + "</figcaption>" + body + "</figure>";
}

// x of each line: elapsed seconds when every line has them, else the step.
bool have_elapsed(const std::vector<nlohmann::json>& m) {
  for (const nlohmann::json& l : m) {
    if (!std::isfinite(number_or_nan(l, "elapsed_s"))) return false;
  }
  return true;
}

Series series_of(const std::vector<nlohmann::json>& m, const char* x_key, const char* y_key, double scale = 1.0) {
  Series s;
  for (const nlohmann::json& l : m) {
    s.x.push_back(number_or_nan(l, x_key));
    s.y.push_back(number_or_nan(l, y_key) * scale);
  }
  return s;
}

Chart lines_chart(const std::string& x_label, const std::string& y_label, std::vector<Series> series) {
  Chart c;
  c.x_label = x_label;
  c.y_label = y_label;
  c.series = std::move(series);
  return c;
}

// One series per phase of step_ms, stacked, against the step.
Chart step_breakdown(const std::vector<nlohmann::json>& m) {
  Chart c;
  c.kind = Chart::Kind::kStackedAreas;
  c.x_label = "step";
  c.y_label = "time per step (ms)";
  for (size_t p = 0; p < std::size(kPhases); ++p) {
    Series s;
    s.name = kPhaseNames[p];
    for (const nlohmann::json& l : m) {
      s.x.push_back(number_or_nan(l, "step"));
      const auto ms = l.find("step_ms");
      s.y.push_back(ms != l.end() && ms->is_object() ? number_or_nan(*ms, kPhases[p]) : 0.0);
    }
    c.series.push_back(std::move(s));
  }
  return c;
}

// One series per source name (in order of first appearance), its share of batches in
// each interval, stacked to 100%.
Chart source_shares(const std::vector<nlohmann::json>& m, const char* x_key) {
  Chart c;
  c.kind = Chart::Kind::kStackedAreas;
  c.x_label = std::string(x_key) == "elapsed_s" ? "elapsed (s)" : "step";
  c.y_label = "share of batches (%)";
  c.y_max_at_least = 100;
  std::vector<std::string> names;
  for (const nlohmann::json& l : m) {
    const auto src = l.find("sources");
    if (src == l.end() || !src->is_array()) continue;
    for (const nlohmann::json& s : *src) {
      const auto n = s.find("name");
      if (s.is_object() && n != s.end() && n->is_string() &&
          std::find(names.begin(), names.end(), n->get<std::string>()) == names.end()) {
        names.push_back(n->get<std::string>());
      }
    }
  }
  for (const std::string& name : names) {
    Series se;
    se.name = name;
    for (const nlohmann::json& l : m) {
      se.x.push_back(number_or_nan(l, x_key));
      double share = 0.0;
      const auto src = l.find("sources");
      if (src != l.end() && src->is_array()) {
        for (const nlohmann::json& s : *src) {
          if (s.is_object() && s.value("name", nlohmann::json()) == name) share = number_or_nan(s, "share");
        }
      }
      se.y.push_back(std::isfinite(share) && share > 0 ? share : 0.0);
    }
    c.series.push_back(std::move(se));
  }
  // Rounded shares may sum to a little over or under 1: scale each interval to 100%.
  for (size_t i = 0; i < m.size(); ++i) {
    double total = 0.0;
    for (const Series& se : c.series) total += se.y[i];
    for (Series& se : c.series) se.y[i] = total > 0 ? 100.0 * se.y[i] / total : 0.0;
  }
  return c;
}

}  // namespace

double number_or_nan(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return std::numeric_limits<double>::quiet_NaN();
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : std::numeric_limits<double>::quiet_NaN();
}

std::string metrics_charts(const std::vector<nlohmann::json>& m, const std::string& note) {
  if (m.empty()) {
    const std::string why = note.empty() ? "no metrics.jsonl beside summary.json: the charts over time need it "
                                           "(the trainer writes it; older runs have none)"
                                         : note;
    return "<p class=\"nodata\">" + html_escape(why) + "</p>";
  }
  const bool elapsed = have_elapsed(m);
  const char* x_key = elapsed ? "elapsed_s" : "step";
  const std::string x_label = elapsed ? "elapsed (s)" : "step";
  std::string out = "<div class=\"grid\">";
  out += figure("Throughput (all ranks)",
                render_chart(lines_chart(x_label, "samples/s", {series_of(m, x_key, "samples_per_sec")})));
  Chart wait = lines_chart(x_label, "data wait (% of step time)", {series_of(m, x_key, "data_wait_pct")});
  wait.y_max_at_least = 5;
  out += figure("Waiting for data", render_chart(wait));
  out += figure("Where a step's time goes", render_chart(step_breakdown(m)));
  out += figure("Each source's share of batches", render_chart(source_shares(m, x_key)));
  out += figure("Training loss", render_chart(lines_chart("step", "loss", {series_of(m, "step", "loss")})));
  std::vector<nlohmann::json> evals;
  for (const nlohmann::json& l : m) {
    if (std::isfinite(number_or_nan(l, "eval_accuracy"))) evals.push_back(l);
  }
  if (evals.empty()) {
    out += figure("Evaluation accuracy", "<p class=\"nodata\">no evaluation ran (give --eval-data to measure accuracy)</p>");
  } else {
    Chart acc = lines_chart("step", "accuracy (%)", {series_of(evals, "step", "eval_accuracy", 100.0)});
    acc.y_max_at_least = 100;
    out += figure("Evaluation accuracy", render_chart(acc));
  }
  return out + "</div>";
}

}  // namespace tandem::report
