#include "pipeline_ops.h"

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


namespace tandem::data::pipeline_ops {

// Every step, its parameters in positional order and their defaults (torchvision's).
const std::vector<OpDef>& ops() {
  static const std::vector<OpDef> table = {
      {"decode", {{"channels", 0}, {"scaled", 1}}},
      {"random_resized_crop",
       {{"size", kRequired}, {"scale_min", 0.08}, {"scale_max", 1.0}, {"ratio_min", 3.0 / 4.0},
        {"ratio_max", 4.0 / 3.0}, {"width", 0}}},
      {"resize", {{"size", kRequired}, {"width", 0}}},
      {"center_crop", {{"size", kRequired}, {"width", 0}}},
      {"random_crop",
       {{"size", kRequired}, {"width", 0}, {"padding_left", 0}, {"padding_top", 0}, {"padding_right", 0},
        {"padding_bottom", 0}, {"pad_if_needed", 0}, {"fill", 0},
        {"padding_mode", 0, {"constant", "edge", "reflect", "symmetric"}}}},
      {"hflip", {{"p", 0.5}}},
      {"vflip", {{"p", 0.5}}},
      {"random_grayscale", {{"p", 0.1}}},
      {"color_jitter", {{"brightness", 0}, {"contrast", 0}, {"saturation", 0}, {"hue", 0}, {"p", 1}}},
      {"gaussian_blur", {{"kernel_size", kRequired}, {"sigma_min", 0.1}, {"sigma_max", 2.0}, {"p", 1}}},
      {"rotation", {{"degrees", kRequired}}},
      {"trivial_augment_wide", {{"num_magnitude_bins", 31}}},
      {"rand_augment", {{"num_ops", 2}, {"magnitude", 9}, {"num_magnitude_bins", 31}}},
      {"auto_augment", {{"policy", 0, {"imagenet", "cifar10", "svhn"}}}},
      {"aug_mix", {{"severity", 3}, {"mixture_width", 3}, {"chain_depth", -1}, {"alpha", 1.0}}},
      {"random_erasing",
       {{"p", 0.5}, {"scale_min", 0.02}, {"scale_max", 0.33}, {"ratio_min", 0.3}, {"ratio_max", 3.3}, {"value", 0}}},
      {"random_choice", {}, true},  // weights; the steps themselves: StepSpec::steps
      {"random_order", {}},
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
    } else if (key == "padding" && has_param(op, "padding_left")) {  // RandomCrop's: n, (lr, tb) or (l, t, r, b)
      const std::vector<std::string> v = tuple.empty() ? std::vector<std::string>{value} : tuple;
      if (v.size() != 1 && v.size() != 2 && v.size() != 4) fail(text, "padding takes 1, 2 or 4 values, as torchvision's");
      const size_t t = v.size() == 1 ? 0 : 1, r = v.size() == 4 ? 2 : 0, b = v.size() == 4 ? 3 : t;
      for (const auto& [side, i] : {std::pair{"left", size_t{0}}, {"top", t}, {"right", r}, {"bottom", b}}) {
        out.emplace_back(std::string("padding_") + side, v[i]);
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
  } else if (op == "random_crop") {
    require(is_count(p("size"), 1), text, "size must be a whole number >= 1");
    require(is_count(p("width"), 0), text, "width must be a whole number >= 0 (0 = size)");
    for (const char* side : {"padding_left", "padding_top", "padding_right", "padding_bottom"}) {
      require(is_count(p(side), 0) && p(side) <= 4096, text, "padding must be whole numbers in [0, 4096]");
    }
    require(p("pad_if_needed") == 0 || p("pad_if_needed") == 1, text, "pad_if_needed must be 0 or 1");
    require(is_count(p("fill"), 0) && p("fill") <= 255, text, "fill must be a whole number in [0, 255]");
  } else if (op == "random_resized_crop" || op == "resize" || op == "center_crop") {
    require(is_count(p("size"), 1), text, "size must be a whole number >= 1");
    require(is_count(p("width"), 0), text, "width must be a whole number >= 0 (0 = size)");
    if (op == "random_resized_crop") {
      require(p("scale_min") > 0 && p("scale_min") <= p("scale_max"), text, "need 0 < scale_min <= scale_max");
      require(p("ratio_min") > 0 && p("ratio_min") <= p("ratio_max"), text, "need 0 < ratio_min <= ratio_max");
    }
  } else if (op == "hflip" || op == "vflip" || op == "random_grayscale") {
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


}  // namespace tandem::data::pipeline_ops
