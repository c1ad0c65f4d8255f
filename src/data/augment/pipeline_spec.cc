#include "tandem/data/augment/pipeline_spec.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tandem/common/error.h"
#include "tandem/common/hash.h"
#include "tandem/common/text.h"
#include "tandem/data/core/dataset.h"  // fnv1a, hex64

#include "pipeline_ops.h"

namespace tandem::data {
namespace {

using namespace pipeline_ops;

// python(FILE:FUNCTION): FILE must be a readable file; its bytes' hash goes into the spec.
StepSpec python_step(const std::string& text, const std::string& file, const std::string& function) {
  if (file.empty() || function.empty()) {
    fail(text, "name the file and the function in it, e.g. python(my_aug.py:augment)");
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) fail(text, printable(file, 200) + " is not a file");
  std::ifstream in(file, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  if (!in) fail(text, "cannot read " + printable(file, 200) + ": check its permissions");
  StepSpec step{"python", {}};
  step.file = std::filesystem::absolute(file).lexically_normal().string();
  step.function = function;
  step.code = hex64(fnv1a(bytes.str()));
  return step;
}

StepSpec parse_step_json(const nlohmann::json& j);
StepSpec parse_item(const std::string& item);

// The steps random_choice and random_order may hold: those that keep the image's size.
bool keeps_size(const std::string& op) {
  for (const char* k : {"hflip", "vflip", "random_grayscale", "color_jitter", "gaussian_blur", "rotation",
                        "trivial_augment_wide", "rand_augment", "auto_augment", "aug_mix", "random_erasing"}) {
    if (op == k) return true;
  }
  return false;
}

// {"op": "random_choice", "steps": [...], "p": [...]} or {"op": "random_order", "steps": [...]}.
StepSpec parse_group_json(const std::string& text, const nlohmann::json& j) {
  StepSpec step{j["op"].get<std::string>(), {}};
  if (!j.contains("steps") || !j["steps"].is_array() || j["steps"].empty() || j["steps"].size() > 64) {
    fail(text, "give \"steps\": a list of 1 to 64 steps");
  }
  for (const nlohmann::json& s : j["steps"]) {
    if (!s.is_string() && !s.is_object()) fail(text, "each of \"steps\" is a step: \"hflip\" or {\"op\": ...}");
    StepSpec sub = s.is_string() ? parse_item(trim(s.get<std::string>())) : parse_step_json(s);
    if (!keeps_size(sub.op)) fail(text, "'" + sub.op + "' changes the image's size or is not an augmentation: " +
                                            step.op + " holds steps that keep it (flips, colour, blur, ...)");
    step.steps.push_back(std::move(sub));
  }
  if (step.op == "random_choice") {
    const size_t n = step.steps.size();
    const nlohmann::json p = j.value("p", nlohmann::json());
    if (!p.is_null() && (!p.is_array() || p.size() != n)) fail(text, "p needs one weight per step");
    double total = 0;
    for (size_t i = 0; i < n; ++i) {
      const double w = p.is_null() ? 1.0 : p[i].is_number() ? p[i].get<double>() : -1.0;
      if (!(w >= 0) || !std::isfinite(w)) fail(text, "weights in p must be numbers >= 0");
      step.params.push_back(w);
      total += w;
    }
    if (!(total > 0)) fail(text, "the weights in p must not all be 0");
    for (double& w : step.params) w /= total;
  }
  return step;
}

StepSpec parse_python_text(const std::string& text, size_t open) {
  if (open == std::string::npos || text.back() != ')') fail(text, "write it as python(FILE:FUNCTION)");
  const std::string inner = trim(text.substr(open + 1, text.size() - open - 2));
  const size_t colon = inner.rfind(':');
  if (colon == std::string::npos) fail(text, "name the file and the function in it, e.g. python(my_aug.py:augment)");
  return python_step(text, trim(inner.substr(0, colon)), trim(inner.substr(colon + 1)));
}

// "name" or "name(1, 2, key=3)".
StepSpec parse_step_text(const std::string& text) {
  const size_t open = text.find('(');
  const std::string name = trim(text.substr(0, open));
  if (name == "python") return parse_python_text(text, open);
  if (name == "random_choice" || name == "random_order") {
    fail(text, "write " + name + " in the JSON form: {\"op\": \"" + name + "\", \"steps\": [\"hflip\", ...]" +
                   (name == "random_choice" ? ", \"p\": [...]}" : "}"));
  }
  std::vector<std::string> positional;
  std::vector<std::pair<std::string, std::string>> named;
  if (open != std::string::npos) {
    if (text.back() != ')') fail(text, "missing ')'");
    const std::string inner = text.substr(open + 1, text.size() - open - 2);
    size_t start = 0;
    while (!trim(inner).empty() && start <= inner.size()) {
      size_t comma = start;  // the next comma outside a tuple: scale=(0.2, 1.0)
      for (int depth = 0; comma < inner.size() && (inner[comma] != ',' || depth > 0); ++comma) {
        depth += (inner[comma] == '(' || inner[comma] == '[') - (inner[comma] == ')' || inner[comma] == ']');
      }
      const std::string arg = inner.substr(start, comma - start);
      const size_t eq = arg.find('=');
      if (eq == std::string::npos) {
        if (!named.empty()) fail(text, "a positional value follows a named one");
        positional.push_back(arg);
      } else {
        named.emplace_back(trim(arg.substr(0, eq)), arg.substr(eq + 1));
      }
      start = comma + 1;
    }
  }
  return bind_params(text, name, positional, named);
}

// {"op": "color_jitter", "brightness": 0.4} or {"op": "normalize", "args": [...]}.
StepSpec parse_step_json(const nlohmann::json& j) {
  const std::string text = j.dump();
  if (!j.is_object() || !j.contains("op") || !j["op"].is_string()) fail(text, "a JSON step needs \"op\": \"name\"");
  if (j["op"] == "random_choice" || j["op"] == "random_order") return parse_group_json(text, j);
  if (j["op"] == "python") {
    StepSpec step = python_step(text, j.value("file", std::string()), j.value("function", std::string()));
    if (j.contains("transforms")) {
      const nlohmann::json& t = j["transforms"];
      if (!t.is_object() || !t.contains("from") || !t.contains("to") || !t.contains("domain")) {
        fail(text, "\"transforms\" must be {\"args\", \"from\", \"to\", \"domain\"}");
      }
      step.transforms = t.dump();
    }
    return step;
  }
  // Numbers as their exact text, names (a choice parameter's) as they are: bind_params reads both.
  auto token = [&](const std::string& key, const nlohmann::json& v) {
    if (v.is_number()) return format_number(v.get<double>());
    if (!v.is_string()) fail(text, "'" + printable(key, 60) + "' must be a number (or a name, for a choice)");
    return v.get<std::string>();
  };
  std::vector<std::string> positional;
  std::vector<std::pair<std::string, std::string>> named;
  for (const auto& [key, value] : j.items()) {
    if (key == "op") continue;
    if (key == "args" && value.is_array()) {
      for (const auto& v : value) positional.push_back(token("args", v));
      continue;
    }
    named.emplace_back(key, token(key, value));
  }
  return bind_params(text, j["op"].get<std::string>(), positional, named);
}

StepSpec parse_item(const std::string& item) {
  if (item.front() != '{') return parse_step_text(item);
  const nlohmann::json j = nlohmann::json::parse(item, nullptr, false);
  if (j.is_discarded()) fail(item, "not valid JSON");
  return parse_step_json(j);
}

// Splits at commas and newlines outside (), [] and {}.
std::vector<std::string> split_steps(const std::string& text) {
  std::vector<std::string> items;
  std::string current;
  int depth = 0;
  for (char c : text) {
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') --depth;
    if (depth < 0) fail(text, "unbalanced brackets");
    if ((c == ',' || c == '\n') && depth == 0) {
      items.push_back(trim(current));
      current.clear();
    } else {
      current += c;
    }
  }
  if (depth != 0) fail(text, "unbalanced brackets");
  items.push_back(trim(current));
  return items;
}

}  // namespace

double StepSpec::param(const std::string& name) const {
  const OpDef* def = find_op(op);
  for (size_t i = 0; def && i < def->params.size(); ++i)
    if (name == def->params[i].name) return params.at(i);
  throw std::logic_error("step '" + op + "' has no parameter '" + name + "'");
}

std::string PipelineSpec::canonical() const {
  std::string out;
  for (const StepSpec& step : steps) {
    const OpDef* def = find_op(step.op);
    out += (out.empty() ? "" : ",") + step.op + "(";
    if (step.op == "python") {  // the file's name and bytes, not where it lies: hosts may differ
      out += "file=" + std::filesystem::path(step.file).filename().string() + ",function=" + step.function +
             ",code=" + step.code + (step.transforms.empty() ? "" : ",transforms=" + step.transforms) + ")";
      continue;
    }
    if (!step.steps.empty()) {  // random_choice(p=0.5;0.5,steps=[hflip(p=1)|vflip(p=1)])
      std::string weights, steps;
      for (double w : step.params) weights += (weights.empty() ? "" : ";") + format_number(w);
      for (const StepSpec& s : step.steps) steps += (steps.empty() ? "" : "|") + PipelineSpec{{s}}.canonical();
      out += (weights.empty() ? "" : "p=" + weights + ",") + "steps=[" + steps + "])";
      continue;
    }
    for (size_t i = 0; i < step.params.size(); ++i) {
      if (i) out += ",";
      if (!def->variadic) out += std::string(def->params[i].name) + "=";
      const bool choice = !def->variadic && !def->params[i].choices.empty();
      out += choice ? def->params[i].choices.at(static_cast<size_t>(step.params[i])) : format_number(step.params[i]);
    }
    out += ")";
  }
  return out;
}

PipelineSpec parse_pipeline(const std::string& text) {
  PipelineSpec spec;
  const std::string t = trim(text);
  if (t.empty()) return spec;
  if (t.front() == '[') {
    const nlohmann::json j = nlohmann::json::parse(t, nullptr, false);
    if (j.is_discarded() || !j.is_array()) fail(t, "starts with '[' but is not a JSON array");
    for (const auto& e : j) spec.steps.push_back(e.is_string() ? parse_item(trim(e.get<std::string>())) : parse_step_json(e));
    return spec;
  }
  for (const std::string& item : split_steps(t)) {
    if (item.empty()) fail(t, "an empty step (two separators in a row?)");
    spec.steps.push_back(parse_item(item));
  }
  return spec;
}

}  // namespace tandem::data
