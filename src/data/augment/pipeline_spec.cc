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
#include "tandem/common/text.h"
#include "tandem/data/sources/dataset.h"  // fnv1a, hex64

namespace tandem::data {
namespace {

constexpr double kRequired = std::numeric_limits<double>::quiet_NaN();

struct ParamDef {
  const char* name;
  double fallback;  // kRequired: must be given
  std::vector<std::string> choices = {};  // named values (auto_augment's policy): the value is the index
};

struct OpDef {
  const char* name;
  std::vector<ParamDef> params;
  bool variadic = false;  // normalize: any count of positional values
};

// Every step, its parameters in positional order and their defaults (torchvision's).
const std::vector<OpDef>& ops() {
  static const std::vector<OpDef> table = {
      {"decode", {{"channels", 0}, {"scaled", 1}}},
      {"random_resized_crop",
       {{"size", kRequired}, {"scale_min", 0.08}, {"scale_max", 1.0}, {"ratio_min", 3.0 / 4.0},
        {"ratio_max", 4.0 / 3.0}, {"width", 0}}},
      {"resize", {{"size", kRequired}, {"width", 0}}},
      {"center_crop", {{"size", kRequired}, {"width", 0}}},
      {"hflip", {{"p", 0.5}}},
      {"color_jitter", {{"brightness", 0}, {"contrast", 0}, {"saturation", 0}, {"hue", 0}, {"p", 1}}},
      {"gaussian_blur", {{"kernel_size", kRequired}, {"sigma_min", 0.1}, {"sigma_max", 2.0}, {"p", 1}}},
      {"rotation", {{"degrees", kRequired}}},
      {"trivial_augment_wide", {{"num_magnitude_bins", 31}}},
      {"rand_augment", {{"num_ops", 2}, {"magnitude", 9}, {"num_magnitude_bins", 31}}},
      {"auto_augment", {{"policy", 0, {"imagenet", "cifar10", "svhn"}}}},
      {"aug_mix", {{"severity", 3}, {"mixture_width", 3}, {"chain_depth", -1}, {"alpha", 1.0}}},
      {"random_erasing",
       {{"p", 0.5}, {"scale_min", 0.02}, {"scale_max", 0.33}, {"ratio_min", 0.3}, {"ratio_max", 3.3}, {"value", 0}}},
      {"normalize", {}, true},
      {"to_uint8", {}},
      {"python", {}},  // python(FILE:FUNCTION): parse_python_step
  };
  return table;
}

const OpDef* find_op(const std::string& name) {
  for (const OpDef& op : ops())
    if (name == op.name) return &op;
  return nullptr;
}

[[noreturn]] void fail(const std::string& step, const std::string& problem) {
  throw ConfigError("--pipeline step '" + printable(step, 120) + "': " + problem +
                    " (see docs/configuration.md, 'Augmentation pipeline')");
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// The shortest text that reads back as exactly `v`.
std::string format_number(double v) {
  char buf[32];
  for (int digits = 6; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

// "color_jitter has no parameter 'contrst': did you mean 'contrast'? Its parameters: ...".
std::string unknown_parameter(const OpDef& op, const std::string& key) {
  std::vector<std::string> names;
  std::string all;
  for (const ParamDef& p : op.params) {
    names.emplace_back(p.name);
    all += (all.empty() ? "" : ", ") + std::string(p.name);
  }
  const std::string guess = nearest(key, names, std::max<size_t>(1, key.size() / 3));
  return op.name + std::string(" has no parameter '") + printable(key, 60) + "'" +
         (guess.empty() ? "" : ": did you mean '" + guess + "'?") + " Its parameters: " + all;
}

void validate(const std::string& text, const StepSpec& s);
double parse_number(const std::string& text, const std::string& token);

// A parameter's value from its text: a number, or one of its choices' names.
double param_value(const std::string& text, const ParamDef& def, const std::string& token) {
  if (def.choices.empty()) return parse_number(text, token);
  const std::string t = trim(token);
  std::string all;
  for (size_t i = 0; i < def.choices.size(); ++i) {
    if (t == def.choices[i]) return static_cast<double>(i);
    all += (i ? ", " : "") + def.choices[i];
  }
  fail(text, std::string(def.name) + " must be one of " + all + ", not '" + printable(t, 60) + "'");
}

bool has_param(const OpDef& op, const std::string& name) {
  return std::any_of(op.params.begin(), op.params.end(), [&](const ParamDef& p) { return name == p.name; });
}

// The values of a tuple written as torchvision writes it, "(0.2, 1.0)" or "[0.2, 1.0]";
// nothing for a value that is not one.
std::vector<std::string> tuple_values(const std::string& value) {
  const std::string v = trim(value);
  if (v.size() < 2 || !((v.front() == '(' && v.back() == ')') || (v.front() == '[' && v.back() == ']'))) return {};
  std::vector<std::string> out;
  std::stringstream in(v.substr(1, v.size() - 2));
  for (std::string item; std::getline(in, item, ',');) {
    if (!trim(item).empty()) out.push_back(trim(item));
  }
  return out;
}

// torchvision's argument names as tandem's: scale=(a, b) -> scale_min=a, scale_max=b (and
// ratio, sigma); sigma=x -> both x (GaussianBlur's fixed sigma); size=(h, w) -> size=h,
// width=w. Other names pass as they are.
std::vector<std::pair<std::string, std::string>> torchvision_names(
    const std::string& text, const OpDef& op, const std::vector<std::pair<std::string, std::string>>& named) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [key, value] : named) {
    const std::vector<std::string> tuple = tuple_values(value);
    const bool range = has_param(op, key + "_min") && has_param(op, key + "_max") && !has_param(op, key);
    if (range) {
      if (tuple.size() == 2) {
        out.emplace_back(key + "_min", tuple[0]);
        out.emplace_back(key + "_max", tuple[1]);
      } else if (tuple.empty() && key == "sigma") {
        out.emplace_back("sigma_min", value);
        out.emplace_back("sigma_max", value);
      } else {
        fail(text, key + " takes two values, (min, max), as torchvision writes it; or give " + key + "_min and " +
                       key + "_max");
      }
    } else if (key == "size" && has_param(op, "width") && !tuple.empty()) {
      if (tuple.size() > 2) fail(text, "size takes one value or two, (height, width)");
      out.emplace_back("size", tuple[0]);
      if (tuple.size() == 2) out.emplace_back("width", tuple[1]);
    } else {
      out.emplace_back(key, value);
    }
  }
  return out;
}

// Positional and named values -> the op's full parameter list, defaults filled in.
StepSpec bind_params(const std::string& text, const std::string& name, const std::vector<std::string>& positional,
                     const std::vector<std::pair<std::string, std::string>>& named) {
  const OpDef* op = find_op(name);
  if (!op) {
    std::string known;
    std::vector<std::string> names;
    for (const OpDef& o : ops()) {
      known += std::string(known.empty() ? "" : ", ") + o.name;
      names.emplace_back(o.name);
    }
    // Two edits at least: two letters swapped (hfilp) are two.
    const std::string guess = nearest(name, names, std::max<size_t>(2, name.size() / 3));
    fail(text, "unknown step '" + printable(name, 60) + "'" + (guess.empty() ? "" : ": did you mean '" + guess + "'?") +
                   "; known steps: " + known);
  }
  StepSpec step{name, {}};
  if (op->variadic) {
    if (!named.empty()) fail(text, name + " takes positional values only");
    for (const std::string& token : positional) step.params.push_back(parse_number(text, token));
    validate(text, step);
    return step;
  }
  if (positional.size() > op->params.size()) {
    fail(text, name + " takes at most " + std::to_string(op->params.size()) + " parameters");
  }
  for (const ParamDef& p : op->params) step.params.push_back(p.fallback);
  for (size_t i = 0; i < positional.size(); ++i) step.params[i] = param_value(text, op->params[i], positional[i]);
  for (const auto& [key, value] : torchvision_names(text, *op, named)) {
    size_t i = 0;
    while (i < op->params.size() && key != op->params[i].name) ++i;
    if (i == op->params.size()) fail(text, unknown_parameter(*op, key));
    step.params[i] = param_value(text, op->params[i], value);
  }
  for (size_t i = 0; i < op->params.size(); ++i) {
    if (std::isnan(step.params[i])) fail(text, std::string("parameter '") + op->params[i].name + "' is required");
  }
  validate(text, step);
  return step;
}

void require(bool ok, const std::string& text, const std::string& problem) {
  if (!ok) fail(text, problem);
}

bool is_count(double v, double lo) { return v >= lo && v == std::floor(v) && v < 1e6; }

// The AutoAugment family's counts and magnitudes: whole numbers in torchvision's ranges
// (the upper bounds on counts keep a typo from making every sample slow).
void validate_autoaugment(const std::string& text, const StepSpec& s) {
  auto p = [&](const char* name) { return s.param(name); };
  auto whole_in = [&](const char* name, double lo, double hi) {
    const double v = p(name);
    require(v >= lo && v <= hi && v == std::floor(v), text,
            std::string(name) + " must be a whole number in [" + format_number(lo) + ", " + format_number(hi) + "]");
  };
  if (s.op == "trivial_augment_wide" || s.op == "rand_augment") whole_in("num_magnitude_bins", 2, 1000);
  if (s.op == "rand_augment") {
    whole_in("num_ops", 0, 100);
    whole_in("magnitude", 0, p("num_magnitude_bins") - 1);
  }
  if (s.op == "aug_mix") {
    whole_in("severity", 1, 10);
    whole_in("mixture_width", 1, 100);
    require(p("chain_depth") == -1 || (is_count(p("chain_depth"), 1) && p("chain_depth") <= 100), text,
            "chain_depth must be -1 (1 to 3 at random) or a whole number in [1, 100]");
    require(p("alpha") > 0 && p("alpha") <= 1e6, text, "alpha must be in (0, 1e6]");
  }
}

// Ranges torchvision enforces (or that make the step meaningful).
void validate(const std::string& text, const StepSpec& s) {
  const auto& op = s.op;
  auto p = [&](const char* name) { return s.param(name); };
  auto probability = [&] { require(p("p") >= 0 && p("p") <= 1, text, "p must be in [0, 1]"); };
  if (op == "decode") {
    require(p("channels") == 0 || p("channels") == 1 || p("channels") == 3, text, "channels must be 0 (the source's), 1 or 3");
    require(p("scaled") == 0 || p("scaled") == 1, text, "scaled must be 0 or 1");
  } else if (op == "random_resized_crop" || op == "resize" || op == "center_crop") {
    require(is_count(p("size"), 1), text, "size must be a whole number >= 1");
    require(is_count(p("width"), 0), text, "width must be a whole number >= 0 (0 = size)");
    if (op == "random_resized_crop") {
      require(p("scale_min") > 0 && p("scale_min") <= p("scale_max"), text, "need 0 < scale_min <= scale_max");
      require(p("ratio_min") > 0 && p("ratio_min") <= p("ratio_max"), text, "need 0 < ratio_min <= ratio_max");
    }
  } else if (op == "hflip") {
    probability();
  } else if (op == "color_jitter") {
    require(p("brightness") >= 0 && p("contrast") >= 0 && p("saturation") >= 0, text,
            "brightness, contrast and saturation must be >= 0");
    require(p("hue") >= 0 && p("hue") <= 0.5, text, "hue must be in [0, 0.5]");
    probability();
  } else if (op == "gaussian_blur") {
    require(is_count(p("kernel_size"), 1) && static_cast<int>(p("kernel_size")) % 2 == 1, text,
            "kernel_size must be odd and positive");
    require(p("sigma_min") > 0 && p("sigma_min") <= p("sigma_max"), text, "need 0 < sigma_min <= sigma_max");
    probability();
  } else if (op == "rotation") {
    require(p("degrees") >= 0 && p("degrees") <= 360, text, "degrees must be in [0, 360]");
  } else if (op == "trivial_augment_wide" || op == "rand_augment" || op == "auto_augment" || op == "aug_mix") {
    validate_autoaugment(text, s);
  } else if (op == "random_erasing") {
    probability();
    require(p("scale_min") >= 0 && p("scale_min") <= p("scale_max") && p("scale_max") <= 1, text,
            "need 0 <= scale_min <= scale_max <= 1");
    require(p("ratio_min") > 0 && p("ratio_min") <= p("ratio_max"), text, "need 0 < ratio_min <= ratio_max");
    require(is_count(p("value"), 0) && p("value") <= 255, text, "value must be a whole number in [0, 255]");
  } else if (op == "normalize") {
    const size_t n = s.params.size();
    require(n == 2 || n == 6, text, "normalize takes (mean, std) or (m0, m1, m2, s0, s1, s2)");
    for (size_t i = n / 2; i < n; ++i) require(s.params[i] > 0, text, "std values must be > 0");
  }
}

double parse_number(const std::string& text, const std::string& token) {
  const std::string t = trim(token);
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (t.empty() || *end != '\0' || !std::isfinite(v)) fail(text, "'" + printable(t, 60) + "' is not a number");
  return v;
}

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
  if (j["op"] == "python") {
    return python_step(text, j.value("file", std::string()), j.value("function", std::string()));
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
             ",code=" + step.code + ")";
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
