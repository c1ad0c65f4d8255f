// What a dataset's description says and how two differ: the settings behind a
// fingerprint, named as a person would, and the hash itself.
#include "tandem/data/sources/source_kinds.h"

#include <algorithm>

#include "tandem/common/text.h"

namespace tandem::data {

namespace {

// A description's settings in order: {"", kind} first, then {name, value} ("pipeline" ->
// "decode(...),..."). A value holding a space (a file name) continues to the next name=.
std::vector<std::pair<std::string, std::string>> settings_of(const std::string& description) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t start = 0;
  while (start <= description.size()) {
    size_t end = description.find(' ', start);
    if (end == std::string::npos) end = description.size();
    const std::string token = description.substr(start, end - start);
    const size_t eq = token.find('=');
    if (out.empty()) out.emplace_back("", token);
    else if (eq == std::string::npos || eq == 0) out.back().second += " " + token;
    else out.emplace_back(token.substr(0, eq), token.substr(eq + 1));
    start = end + 1;
  }
  return out;
}

struct SettingWords {
  const char* name;   // as in the description
  const char* label;  // as a person says it
  const char* flag;   // where it is set
};

constexpr SettingWords kSettingWords[] = {
    {"", "dataset", "--data"},
    {"seed", "seed", "--seed"},
    {"size", "samples per epoch", "--dataset-size"},
    {"image", "image size", "--image-size"},
    {"classes", "classes", "--num-classes"},
    {"pipeline", "pipeline", "--pipeline, or --image-size and --split, which choose the default one"},
    {"files", "files whose names and sizes hash to", "--data: give every host the same files"},
    {"n", "image files", "--data: give every host the same files"},
    {"images", "images file", "--data"},
    {"labels", "labels file", "--data"},
    {"code", "Python file whose bytes hash to", "--data python:FILE:NAME: give every worker the same FILE"},
    {"file", "Python file", "--data python:FILE:NAME"},
    {"name", "Python dataset", "--data python:FILE:NAME"},
    {"args", "Python dataset arguments", "--data-args"},
    {"fields", "sample fields", "--data python:FILE:NAME: the fields its __getitem__ returns"},
    {"shards", "shards whose names, sizes and index hash to", "--data: give every host the same shards"},
    {"manifest", "manifest whose bytes hash to", "--data: give every host the same manifest"},
};

// Where the step of `pipeline` that holds position `at` starts (steps are name(args)
// separated by commas at depth 0).
size_t step_start(const std::string& pipeline, size_t at) {
  size_t start = 0;
  int depth = 0;
  for (size_t i = 0; i < std::min(at, pipeline.size()); ++i) {
    if (pipeline[i] == '(') ++depth;
    if (pipeline[i] == ')') --depth;
    if (pipeline[i] == ',' && depth == 0) start = i + 1;
  }
  return start;
}

// Two pipelines from the first step that differs ("...,random_resized_crop(size=32,...)"):
// their common start says nothing and would push the difference out of a shortened value.
std::pair<std::string, std::string> from_first_difference(const std::string& a, const std::string& b) {
  const auto diff = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  const size_t start = step_start(a, static_cast<size_t>(diff.first - a.begin()));
  if (start == 0) return {a, b};
  return {"...," + a.substr(start), "...," + b.substr(start)};
}

std::string one_difference(const std::string& name, const std::string& theirs, const std::string& ours,
                           std::string_view who) {
  SettingWords words{name.c_str(), name.c_str(), ""};
  for (const SettingWords& w : kSettingWords) {
    if (name == w.name) words = w;
  }
  const auto [a, b] = name == "pipeline" ? from_first_difference(theirs, ours) : std::make_pair(theirs, ours);
  std::string out = std::string(words.label) + " " + printable(a, 120) + ", " + std::string(who) + " expects " +
                    printable(b, 120);
  return *words.flag ? out + " (" + words.flag + ")" : out;
}

}  // namespace

std::string describe_difference(const std::string& theirs, const DataOptions& ours, std::string_view who) {
  if (theirs.empty()) return "";
  const SourceKind& kind = source_kind(ours.data);
  if (kind.fixed_settings == nullptr) return "";
  const DescribedSettings mine = kind.fixed_settings(ours);
  const auto a = settings_of(theirs);
  if (a.front().second != mine.front().second) return one_difference("", a.front().second, mine.front().second, who);
  std::string out;
  for (const auto& setting : mine) {
    const std::string& name = setting.first;
    const auto worker = std::find_if(a.begin(), a.end(), [&](const auto& s) { return s.first == name; });
    if (name.empty() || worker == a.end() || worker->second == setting.second) continue;
    out += (out.empty() ? "" : "; ") + one_difference(name, worker->second, setting.second, who);
  }
  return out;
}

std::string describe_difference(const std::string& theirs, const std::string& ours, std::string_view who) {
  if (theirs.empty() || ours.empty()) return "";
  const auto a = settings_of(theirs), b = settings_of(ours);
  if (a.front().second != b.front().second) return one_difference("", a.front().second, b.front().second, who);
  std::string out;
  // Named pairs, not structured bindings: clang 14 (the fuzz build) cannot capture those.
  for (const auto& setting : a) {
    const std::string& name = setting.first;
    const auto mine = std::find_if(b.begin(), b.end(), [&](const auto& s) { return s.first == name; });
    const std::string expected = mine == b.end() ? "(none)" : mine->second;
    if (expected != setting.second) out += (out.empty() ? "" : "; ") + one_difference(name, setting.second, expected, who);
  }
  for (const auto& setting : b) {
    const std::string& name = setting.first;
    const bool theirs_too = std::any_of(a.begin(), a.end(), [&](const auto& s) { return s.first == name; });
    if (!theirs_too) out += (out.empty() ? "" : "; ") + one_difference(name, "(none)", setting.second, who);
  }
  return out;
}

std::string description_setting(const std::string& description, const std::string& name) {
  if (name.empty()) return "";
  for (const auto& setting : settings_of(description)) {
    if (setting.first == name) return setting.second;
  }
  return "";
}

}  // namespace tandem::data
