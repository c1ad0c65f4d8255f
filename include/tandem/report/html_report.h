// The run report: one self-contained HTML page (inline CSS and SVG, no script, no
// network) with the run's numbers, charts over time from metrics.jsonl, and the plan of
// how many data workers to add. Torch-free (tandem_core), so the trainer can write it at
// the end of a run and `tandem report` can write it later from the files.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/plan/plan_inputs.h"
#include "tandem/plan/prices.h"

namespace tandem::report {

struct ReportInputs {
  nlohmann::json summary;               // the run's summary.json (fields may be missing: older runs)
  std::vector<nlohmann::json> metrics;  // metrics.jsonl's lines; empty: the charts over time say so
  nlohmann::json plan;                  // plan::make_plan's result, or null
  std::string plan_note;                // shown instead of the plan when it is null: why there is none
  std::string summary_path;             // named in the page's footer; may be empty
  std::string metrics_note;             // shown when there are no metrics, e.g. "no metrics.jsonl beside ..."
  std::vector<nlohmann::json> runs;     // every run of the job (runs.jsonl), oldest first; empty: not shown
};

// The page. Every string that came from the run (worker addresses, the model's name, file
// paths) is HTML-escaped.
std::string render_html_report(const ReportInputs& in);

// Renders and writes the page to `path` (atomically, creating its directory). Throws
// std::runtime_error naming the path when it cannot be written.
void write_html_report(const ReportInputs& in, const std::string& path);

// The same from the parts, for the trainer at the end of a run: `plan` may be null.
void write_html_report(const nlohmann::json& summary, const std::vector<nlohmann::json>& metrics,
                       const nlohmann::json& plan, const std::string& path);

// Everything for one finished run: finds its summary (a summary.json or a run dir, as
// load_run does) and metrics, makes the plan from `prices` (the default price file when
// null), and writes the page to `out` (default: report.html beside the summary). A plan
// that cannot be made (say the run's instance types are unknown) is not an error: the page
// says why in its place. Returns the path written. Throws ConfigError when there is no
// readable summary.
std::string write_run_report(const std::string& run, const std::string& out = "",
                             const plan::PriceTable* prices = nullptr, const plan::PlanOptions& options = {});

}  // namespace tandem::report
