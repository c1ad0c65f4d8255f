#include "tandem/report/html_report.h"

#include <cmath>
#include <filesystem>

#include "metrics_charts.h"
#include "tandem/common/error.h"
#include "tandem/plan/planner.h"
#include "tandem/report/run_files.h"
#include "tandem/common/files.h"
#include "tandem/report/summary.h"
#include "tandem/report/summary_reader.h"
#include "tandem/report/svg_chart.h"

namespace tandem::report {

namespace {

constexpr const char* kStyle = R"(
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#212529;margin:0;background:#f8f9fa}
main{max-width:1180px;margin:0 auto;padding:24px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:19px;margin:32px 0 10px;border-bottom:1px solid #dee2e6;padding-bottom:4px}
.sub{color:#495057;margin:0 0 16px}
.cards{display:flex;flex-wrap:wrap;gap:12px}
.card{background:#fff;border:1px solid #dee2e6;border-radius:6px;padding:10px 14px;min-width:140px}
.card b{display:block;font-size:21px}.card span{color:#495057;font-size:13px}
table{border-collapse:collapse;background:#fff;font-variant-numeric:tabular-nums}
th,td{border:1px solid #dee2e6;padding:4px 10px;text-align:right}th{background:#f1f3f5}
td.l,th.l{text-align:left}tr.best td{background:#fff4e6;font-weight:600}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(560px,1fr));gap:16px}
figure{margin:0;background:#fff;border:1px solid #dee2e6;border-radius:6px;padding:10px}
figcaption{font-weight:600;margin-bottom:4px}figure.plan{max-width:580px;margin-top:16px}
svg.chart{display:block;max-width:100%;height:auto}
.grid line.grid,figure line.grid{stroke:#e9ecef}line.axis,line.tickmark{stroke:#495057}
text.tick{font-size:11px;fill:#495057}text.label{font-size:12px;fill:#212529}
path.line{stroke-width:2}polygon.area{opacity:.85}
.legend{font-size:12px;display:flex;flex-wrap:wrap;gap:4px 14px;margin-top:4px}
.legend i{display:inline-block;width:10px;height:10px;margin-right:5px;border-radius:2px}
.nodata{color:#868e96;font-style:italic}.note{color:#495057}ul.caveats{color:#495057}
footer{margin-top:32px;color:#868e96;font-size:12px}
)";

std::string text(const nlohmann::json& j, const char* key, const std::string& fallback = "-") {
  const auto it = j.is_object() ? j.find(key) : j.end();
  if (it == j.end() || it->is_null()) return fallback;
  return html_escape(it->is_string() ? it->get<std::string>() : it->dump());
}

std::string number(const nlohmann::json& j, const char* key, int decimals, double scale = 1.0) {
  const double v = number_or_nan(j, key);
  return std::isfinite(v) ? plan::group_thousands(v * scale, decimals) : "-";
}

// A fraction as a percentage, or "-" (never "-%") when it is absent.
std::string percent(const nlohmann::json& j, const char* key, int decimals) {
  return std::isfinite(number_or_nan(j, key)) ? number(j, key, decimals, 100) + "%" : "-";
}


// A number of the summary, or "-" when it is absent; a fraction as a percentage.
std::string num(double v, int decimals, double scale = 1.0) {
  return std::isfinite(v) ? plan::group_thousands(v * scale, decimals) : "-";
}
std::string pct(double v, int decimals) { return std::isfinite(v) ? num(v, decimals, 100) + "%" : "-"; }
// Seconds as they are worth reading: 0.03, 1.2, 1,234.
std::string secs(double v) {
  if (!std::isfinite(v)) return "-";
  return plan::group_thousands(v, v == 0 ? 0 : v < 1 ? 3 : v < 100 ? 2 : 1);
}

std::string card(const std::string& value, const std::string& label) {
  return "<div class=\"card\"><b>" + value + "</b><span>" + html_escape(label) + "</span></div>";
}

std::string cards(const SummaryView& s) {
  std::string out = "<div class=\"cards\">";
  out += card(num(s.steps, 0), "steps");
  out += card(num(global_rate(s), 0), "samples/s, all ranks");
  out += card(num(s.ceiling_samples_per_sec, 0), "samples/s ceiling (no data wait)");
  out += card(pct(s.data_wait_fraction, 1), "of step time waiting for data");
  out += card(num(s.wall_seconds, 1) + " s", "wall time");
  out += card(num(s.final_loss, 4), "final loss");
  out += card(pct(s.eval_accuracy, 1), "evaluation accuracy");
  return out + "</div>";
}

// `value` HTML-escaped, or `fallback` when it is empty.
std::string text_or(const std::string& value, const std::string& fallback) {
  return value.empty() ? fallback : html_escape(value);
}

std::string run_table(const SummaryView& s) {
  const plan::PlanInputs& pi = s.plan_inputs;
  std::string out = "<table>";
  auto row = [&](const std::string& k, const std::string& v) { out += "<tr><th class=\"l\">" + k + "</th><td class=\"l\">" + v + "</td></tr>"; };
  row("model", text_or(s.model, "-"));
  row("device", text_or(s.device, "-"));
  row("ranks (world size)", num(s.world_size, 0));
  row("batch per rank / global", num(s.batch_size, 0) + " / " + num(s.global_batch, 0));
  row("trainer", (pi.trainer_host_cores > 0 ? std::to_string(pi.trainer_host_cores) : "?") + " cores, " +
                     text_or(pi.cpu_model, "CPU unknown") + ", " +
                     text_or(pi.trainer_instance_type, "instance type unknown"));
  if (!s.failure.empty()) {
    row("failed", "<b>yes</b> (exit " + num(s.exit_code, 0) + "): " + html_escape(s.failure));
  } else {
    row("interrupted", s.interrupted ? "yes (SIGTERM: the run stopped early)" : "no");
  }
  return out + "</table>";
}

// One row per run of the job (a requeued or resubmitted job runs several times), from
// runs.jsonl: when it ended, the steps it went from and to, and how it ended.
std::string runs_table(const std::vector<nlohmann::json>& runs) {
  std::string out = "<table><tr><th class=\"l\">ended</th><th>from step</th><th>steps</th><th class=\"l\">outcome</th></tr>";
  for (const nlohmann::json& r : runs) {
    const SummaryView v = read_summary(r);
    const std::string ended = r.contains("ended") && r["ended"].is_string() ? r["ended"].get<std::string>() : "?";
    const double from = r.contains("start_step") && r["start_step"].is_number() ? r["start_step"].get<double>() : NAN;
    const std::string outcome = !v.failure.empty() ? "failed (exit " + num(v.exit_code, 0) + "): " + html_escape(v.failure)
                                : v.interrupted    ? "stopped (SIGTERM), resumable"
                                                   : "finished";
    out += "<tr><td class=\"l\">" + html_escape(ended) + "</td><td>" + num(from, 0) + "</td><td>" + num(v.steps, 0) +
           "</td><td class=\"l\">" + outcome + "</td></tr>";
  }
  return out + "</table>";
}

// The settings that made the samples and trained on them (summary "settings"; runs
// before it have none).
std::string settings_table(const SummaryView& s) {
  if (s.settings.empty()) return "<p class=\"nodata\">no settings in the summary (a run before tandem recorded them)</p>";
  static const std::pair<const char*, const char*> kRows[] = {
      {"data", "data"}, {"dataset", "dataset"}, {"made", "samples made"}, {"dataset_size", "samples per epoch"}, {"image_size", "image size"},
      {"num_classes", "classes"}, {"seed", "seed"}, {"pipeline", "pipeline"}, {"wire_dtype", "wire dtype"},
      {"optimizer", "optimizer"}, {"lr", "learning rate"}, {"lr_schedule", "schedule"}, {"warmup_steps", "warmup steps"},
      {"momentum", "momentum"}, {"weight_decay", "weight decay"}, {"clip_grad_norm", "gradient clipping"},
      {"mixup", "mixup alpha"}, {"cutmix", "cutmix alpha"}, {"label_smoothing", "label smoothing"},
      {"amp", "mixed precision"}, {"fused_optimizer", "fused optimizer"}};
  std::string out = "<table>";
  for (const auto& [key, name] : kRows) {
    if (!s.settings.contains(key)) continue;
    // null: a script's own choice, which tandem does not know (its optimizer, its schedule)
    out += std::string("<tr><th class=\"l\">") + name + "</th><td class=\"l\">" +
           text(s.settings, key, "the script's own (not known to tandem)") + "</td></tr>";
  }
  return out + "</table>";
}

// "algo-1 (10.0.0.5:6000)": a source by the host name its worker gave (plan_inputs), with
// the address the trainer reached it at; "local" and unknown workers by their address.
std::string source_name(const SummaryView& s, const SourceSummary& src) {
  const std::string address = text_or(src.address, "-");
  for (const plan::WorkerRate& w : s.plan_inputs.workers) {
    if (w.address == src.address && !w.host.empty()) return html_escape(w.host) + " (" + address + ")";
  }
  return address;
}

std::string sources_table(const SummaryView& s) {
  if (s.sources.empty()) return "<p class=\"nodata\">no sources recorded</p>";
  std::string out = "<table><tr><th class=\"l\">source</th><th>batches</th><th>samples</th><th>images/s</th>"
                    "<th>share</th><th>compute (s)</th><th class=\"l\">state</th></tr>";
  for (const SourceSummary& src : s.sources) {
    // The error says what failed ("data worker X failed: ...", "local preprocessing failed: ...").
    std::string state = src.failed ? text_or(src.error, "failed") : "ok";
    if (src.rejoins > 0) state += ", rejoined " + num(src.rejoins, 0) + "x";
    out += "<tr><td class=\"l\">" + source_name(s, src) + "</td><td>" + num(src.batches, 0) + "</td><td>" +
           num(src.samples, 0) + "</td><td>" + num(src.images_per_sec, 0) + "</td><td>" + pct(src.share, 1) +
           "</td><td>" + secs(src.compute_seconds) + "</td><td class=\"l\">" + state + "</td></tr>";
  }
  return out + "</table>";
}

std::string step_time_table(const SummaryView& s) {
  if (!s.step_seconds) return "<p class=\"nodata\">no step_seconds in the summary</p>";
  const StepSeconds& st = *s.step_seconds;
  // A script run measures two phases: waiting for data, and its own work between batches.
  const bool script = std::isfinite(st.script);
  std::vector<std::pair<double, const char*>> phases = {{st.data_wait, "data wait"}};
  if (script) phases.emplace_back(st.script, "the script's own work");
  else phases.insert(phases.end(), {{st.host_to_device, "host to device"}, {st.forward_backward, "forward + backward"},
                                    {st.communication, "communication"}, {st.optimizer, "optimizer"}});
  double total = 0;
  for (const auto& [v, _] : phases) total += std::isfinite(v) ? v : 0.0;
  std::string out = "<table><tr><th class=\"l\">phase</th><th>seconds (whole run)</th><th>ms per step</th><th>share</th></tr>";
  for (const auto& [v, name] : phases) {
    out += std::string("<tr><td class=\"l\">") + name + "</td><td>" + num(v, 2) + "</td><td>" +
           (std::isfinite(v) && s.steps > 0 ? plan::group_thousands(1000 * v / s.steps, 2) : "-") + "</td><td>" +
           (std::isfinite(v) && total > 0 ? plan::group_thousands(100 * v / total, 1) + "%" : "-") + "</td></tr>";
  }
  return out + "</table>";
}

std::string plan_table(const nlohmann::json& p) {
  const int best = p["recommended"]["workers"].get<int>(), fast = p["fastest_within"]["workers"].get<int>();
  std::string out = "<table><tr><th>workers</th><th>samples/s</th><th>step (ms)</th><th>$/hour</th>"
                    "<th>$ per 1,000 steps</th><th>$ per million samples</th><th>saving vs 0</th><th class=\"l\"></th></tr>";
  for (const nlohmann::json& r : p["rows"]) {
    const int n = r["workers"].get<int>();
    const bool priced = p.value("priced", true);
    std::string mark = n != best ? "" : priced ? "cheapest" : "recommended";
    if (n == fast && fast != best) mark += priced ? "fastest within " + number(p["fastest_within"], "within_pct", 0) + "%" : "fastest";
    if (r["at_ceiling"].get<bool>()) mark += std::string(mark.empty() ? "" : ", ") + "at ceiling";
    out += std::string("<tr") + (n == best ? " class=\"best\"" : "") + "><td>" + std::to_string(n) + "</td><td>" +
           number(r, "samples_per_sec", 0) + "</td><td>" + number(r, "step_ms", 1) + "</td><td>" +
           number(r, "usd_per_hour", 2) + "</td><td>" + number(r, "usd_per_1000_steps", 3) + "</td><td>" +
           number(r, "usd_per_million_samples", 3) + "</td><td>" + (n == 0 ? "-" : percent(r, "saving_vs_none", 0)) +
           "</td><td class=\"l\">" + mark + "</td></tr>";
  }
  return out + "</table>";
}

std::string plan_section(const ReportInputs& in) {
  if (in.plan.is_null() || !in.plan.is_object()) {
    return "<p class=\"nodata\">no plan: " + html_escape(in.plan_note.empty() ? "none was made" : in.plan_note) + "</p>";
  }
  const nlohmann::json& p = in.plan;
  std::string out = "<p>" + html_escape(p.value("explanation", "")) + "</p>";
  const bool priced = p.value("priced", true);
  auto per_hour = [&](const nlohmann::json& t) { return priced ? " at $" + number(t, "usd_per_hour", 3) + "/hour" : std::string(" (no price)"); };
  out += "<p class=\"note\">Trainer: " + number(p["trainer"], "hosts", 0) + " x " + text(p["trainer"], "instance_type") +
         per_hour(p["trainer"]) + ". Worker: " + text(p["worker"], "instance_type") + " (" +
         number(p["worker"], "vcpus", 0) + " vCPUs, " + text(p["worker"], "cpu", "CPU not stated") + ")" +
         per_hour(p["worker"]) + ", " + number(p["worker"], "samples_per_sec", 0) +
         " samples/s each from " + number(p["measurement"], "images_per_cpu_second", 1) +
         " samples per CPU-second measured on " + text(p["measurement"], "where") + ".</p>";
  out += plan_table(p);
  Chart c;
  c.kind = Chart::Kind::kBars;
  c.x_label = "data-worker instances (N)";
  c.y_label = priced ? "$ per million samples" : "samples/s";
  Series s;
  for (const nlohmann::json& r : p["rows"]) {
    s.x.push_back(r["workers"].get<int>());
    s.y.push_back(number_or_nan(r, priced ? "usd_per_million_samples" : "samples_per_sec"));
  }
  c.series.push_back(std::move(s));
  c.highlight = p["recommended"]["workers"].get<int>();
  out += std::string("<figure class=\"plan\"><figcaption>") +
         (priced ? "Cost per sample against the number of workers (cheapest in orange)"
                 : "Samples/s against the number of workers (recommended in orange; no prices)") +
         "</figcaption>" + render_chart(c) + "</figure><ul class=\"caveats\">";
  for (const nlohmann::json& cv : p.value("caveats", nlohmann::json::array())) {
    out += "<li>" + html_escape(cv.is_string() ? cv.get<std::string>() : cv.dump()) + "</li>";
  }
  return out + "</ul>";
}

}  // namespace

std::string render_html_report(const ReportInputs& in) {
  const SummaryView s = read_summary(in.summary);
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
                    "<title>tandem report: " + text_or(s.model, "run") + "</title><style>" + kStyle +
                    "</style></head><body><main>";
  out += "<h1>tandem run report</h1><p class=\"sub\">" + text_or(s.model, "model unknown") + " on " +
         text_or(s.device, "an unknown device") + ", " + num(s.world_size, 0) + " rank(s), " + num(s.steps, 0) +
         " steps</p>";
  out += cards(s);
  out += "<h2>Run</h2>" + run_table(s);
  if (in.runs.size() > 1) out += "<h2>Every run of this job</h2>" + runs_table(in.runs);
  out += "<h2>Settings</h2>" + settings_table(s);
  out += "<h2>Data sources</h2>" + sources_table(s);
  out += "<h2>Where step time went</h2>" + step_time_table(s);
  std::string note = in.metrics_note;
  out += "<h2>Over the run</h2>" + metrics_charts(in.metrics, note);
  out += "<h2>How many data workers? (tandem plan)</h2>" + plan_section(in);
  out += "<footer>Written by tandem from " + html_escape(in.summary_path.empty() ? "the run's summary" : in.summary_path) +
         ". This page needs no network: charts are inline SVG.</footer></main></body></html>\n";
  return out;
}

void write_html_report(const ReportInputs& in, const std::string& path) {
  write_file_atomically(path, render_html_report(in));
}

void write_html_report(const nlohmann::json& summary, const std::vector<nlohmann::json>& metrics,
                       const nlohmann::json& plan, const std::string& path) {
  ReportInputs in;
  in.summary = summary;
  in.metrics = metrics;
  in.plan = plan;
  if (plan.is_null()) in.plan_note = "the run did not make one";
  write_html_report(in, path);
}

std::string write_run_report(const std::string& run, const std::string& out, const plan::PriceTable* prices,
                             const plan::PlanOptions& options) {
  RunFiles files = load_run(run);
  ReportInputs in;
  in.summary = std::move(files.summary);
  in.metrics = std::move(files.metrics);
  in.summary_path = files.summary_path;
  in.runs = std::move(files.runs);
  if (files.metrics_path.empty()) {
    in.metrics_note = "no metrics.jsonl beside " + files.summary_path + ": the charts over time need it (older runs have none)";
  } else if (in.metrics.empty()) {
    in.metrics_note = files.metrics_path + " has no complete lines yet";
  }
  try {
    const plan::PriceTable table = prices ? *prices : plan::load_default_price_table();
    in.plan = plan::make_plan(in.summary, table, options);
  } catch (const ConfigError& e) {
    in.plan_note = e.what();
  }
  const std::string path =
      out.empty() ? (std::filesystem::path(files.summary_path).parent_path() / "report.html").string() : out;
  write_html_report(in, path);
  return path;
}

}  // namespace tandem::report
