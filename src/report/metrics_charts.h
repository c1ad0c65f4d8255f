// The report's charts over time, built from metrics.jsonl's lines (private to src/report).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tandem::report {

// HTML: throughput and data wait over time, the step-time breakdown, each source's share
// over time, loss and accuracy over steps. With no lines, a note (`note`, or a default
// saying metrics.jsonl is missing) in place of each chart.
std::string metrics_charts(const std::vector<nlohmann::json>& metrics, const std::string& note);

// The number at `key` in `j`, or NaN when absent or not a number.
double number_or_nan(const nlohmann::json& j, const char* key);

}  // namespace tandem::report
