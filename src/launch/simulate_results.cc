// What a finished simulated run shows and keeps (simulate_results.h).
#include "simulate_results.h"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "tandem/common/exit_codes.h"
#include "tandem/common/files.h"
#include "tandem/common/text.h"
#include "tandem/report/summary_reader.h"

namespace tandem::launch {

namespace fs = std::filesystem;

// A file's text, "" when it is missing (a host that wrote no failure, no summary).
std::string text_of(const fs::path& path) { return read_file(path.string()).value_or(""); }

namespace {

std::string fixed(double v, int digits) { return std::isfinite(v) ? fmt::format("{:.{}f}", v, digits) : "?"; }

// A few lines a person reads: what trained, how fast (global and per rank), how the
// sources shared the work, and where the files are. The JSON stays in its file.
std::string summary_table(const report::SummaryView& s, const fs::path& dir) {
  std::string out;
  const uint64_t steps = std::isfinite(s.steps) ? static_cast<uint64_t>(s.steps) : 0;
  const uint64_t ranks = std::isfinite(s.world_size) ? static_cast<uint64_t>(s.world_size) : 1;
  // A script's loss is its own: known only when it reported one (feed.log(loss=...)).
  const std::string loss = std::isfinite(s.first_loss)
                               ? "loss " + fixed(s.first_loss, 4) + " -> " + fixed(s.final_loss, 4)
                               : "loss not reported (the script's own; feed.log(loss=...) reports it)";
  out += fmt::format("training    {}, {} epochs, {}, {}{}\n", counted(steps, "step"), fixed(s.epochs, 2), loss,
                     counted(ranks, "rank"), s.interrupted ? ", interrupted" : "");
  out += fmt::format("throughput  {} samples/s global ({} per rank), data wait {}%, loop ceiling {} samples/s global\n",
                     fixed(s.global_samples_per_sec, 1), fixed(s.per_rank_samples_per_sec, 1),
                     fixed(std::isfinite(s.data_wait_fraction) ? s.data_wait_fraction * 100 : 0.0, 1),
                     fixed(s.ceiling_samples_per_sec, 1));
  if (std::isfinite(s.eval_accuracy)) out += fmt::format("evaluation  top-1 {}\n", fixed(s.eval_accuracy, 4));
  out += "sources     share of rank 0's batches\n";
  for (const report::SourceSummary& w : s.sources) {
    out += fmt::format("  {:<22} {:>6}%  {:>9} images/s{}\n", printable(w.address.empty() ? "?" : w.address, 40),
                       fixed(std::isfinite(w.share) ? w.share * 100 : 0.0, 1),
                       fixed(std::isfinite(w.images_per_sec) ? w.images_per_sec : 0.0, 1),
                       !w.failed               ? ""
                       : !(w.batches > 0)      ? "  never joined (not answering yet when training ended)"
                                               : "  " + printable(w.error.empty() ? "failed" : w.error, 120));
  }
  out += "files       " + (dir / "summary.json").string() + "\n";
  for (const char* f : {"metrics.jsonl", "report.html"}) {
    if (fs::exists(dir / f)) out += "            " + (dir / f).string() + "\n";
  }
  if (!s.model_file.empty() && fs::exists(s.model_file)) out += "model       " + s.model_file + "\n";
  return out;
}

}  // namespace

// Prints the first trainer's summary as a table and copies the JSON to `copy_to` when
// that is set.
void print_summary(const std::string& run, const std::vector<SimHost>& hosts, const std::string& copy_to) {
  const auto trainer = std::find_if(hosts.begin(), hosts.end(),
                                    [](const SimHost& h) { return h.trainer; });
  const fs::path path = fs::path(run) / trainer->name / "output/data/summary.json";
  if (!fs::exists(path)) {
    std::cout << "no summary from " << trainer->name << ": " << path.string()
              << " does not exist\n";
    return;
  }
  const std::string text = text_of(path);
  const auto summary = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (summary.is_discarded() || !summary.is_object()) {
    std::cout << "the summary " << path.string() << " is not a JSON object\n";
  } else {
    std::cout << summary_table(report::read_summary(summary), path.parent_path());
  }
  if (!copy_to.empty()) {
    if (fs::path(copy_to).has_parent_path()) fs::create_directories(fs::path(copy_to).parent_path());
    fs::copy_file(path, copy_to, fs::copy_options::overwrite_existing);
  }
}

// A run directory simulate made itself keeps, after a good run, what a person reads and
// the trained model: checkpoints (tens of MB for a ResNet, and only good for resuming a
// run that has finished) go, and so do the empty model folders of the worker hosts.
void tidy_run_dir(const std::string& run, const std::vector<SimHost>& hosts) {
  uintmax_t freed = 0;
  for (const auto& host : hosts) {
    const fs::path p = fs::path(run) / host.name / "checkpoints";
    std::error_code ec;
    for (const auto& e : fs::recursive_directory_iterator(p, ec)) {
      if (e.is_regular_file()) freed += e.file_size();
    }
    fs::remove_all(p, ec);
    if (fs::is_empty(fs::path(run) / host.name / "model", ec)) fs::remove(fs::path(run) / host.name / "model", ec);
  }
  spdlog::info("removed the checkpoints ({} MB) from {}: --keep or --run-dir keeps them", freed >> 20, run);
}

// The first trainer's model_file, when its summary names one that exists.
std::string trained_model(const std::string& run, const std::vector<SimHost>& hosts) {
  const auto trainer = std::find_if(hosts.begin(), hosts.end(), [](const SimHost& h) { return h.trainer; });
  const fs::path path = fs::path(run) / trainer->name / "output/data/summary.json";
  const std::string model =
      report::read_summary(nlohmann::json::parse(text_of(path), nullptr, /*allow_exceptions=*/false)).model_file;
  return !model.empty() && fs::exists(model) ? model : "";
}

// One line when every worker host failed, grouping the hosts that failed for the same
// reason (their output/failure, else how they ended): "" otherwise.
bool worker_did_not_fail(const ExitStatus& s) {
  return s.ok() || s.signal == SIGTERM || (s.signal == 0 && s.exit_code == kExitInterrupted);
}

std::string workers_failed(const std::string& run, const std::vector<SimHost>& hosts,
                           const std::vector<ExitStatus>& statuses) {
  std::vector<std::pair<std::string, std::vector<std::string>>> reasons;  // reason -> hosts, in order
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (hosts[i].trainer) continue;
    if (i >= statuses.size() || worker_did_not_fail(statuses[i])) return "";
    std::string why = text_of(fs::path(run) / hosts[i].name / "output/failure");
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    if (why.empty()) why = statuses[i].describe();
    auto it = std::find_if(reasons.begin(), reasons.end(), [&](const auto& r) { return r.first == why; });
    if (it == reasons.end()) it = reasons.insert(reasons.end(), {why, {}});
    it->second.push_back(hosts[i].name);
  }
  if (reasons.empty()) return "";
  const bool one = reasons.size() == 1 && reasons[0].second.size() == 1;
  std::string out = std::string(one ? "the only worker host" : "every worker host") + " failed, so the cluster was stopped: ";
  for (size_t r = 0; r < reasons.size(); ++r) {
    std::string names;
    for (const auto& n : reasons[r].second) names += (names.empty() ? "" : ", ") + n;
    out += (r ? "; " : "") + names + ": " + printable(reasons[r].first, 500);
  }
  return out;
}

void print_failures(const std::string& run, const std::vector<SimHost>& hosts) {
  for (const auto& host : hosts) {
    const fs::path path = fs::path(run) / host.name / "output/failure";
    if (!fs::exists(path)) continue;
    std::string text = text_of(path);
    while (!text.empty() && text.back() == '\n') text.pop_back();
    std::cout << host.name << " failure (" << path.string() << "):\n" << text << "\n";
  }
}

}  // namespace tandem::launch
