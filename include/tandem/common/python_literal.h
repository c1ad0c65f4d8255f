// Python literals as JSON: what SageMaker's generic Estimator sends for a hyperparameter
// that is a list or a dict. The framework estimators (PyTorch, ...) JSON-encode each value;
// the generic Estimator calls str() on it, so ["--epochs", "90"] arrives as
// "['--epochs', '90']" and {"root": "/opt/ml"} as "{'root': '/opt/ml'}".
#pragma once

#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

namespace tandem {

// The value of `text` read as a Python literal of the kinds str() writes for JSON-like
// data: lists and tuples, dicts with string or number keys, strings in single or double
// quotes (with Python's backslash escapes), ints, floats, True, False and None, nested up
// to kMaxJsonDepth. nullopt when `text` is anything else, or has more after the literal.
std::optional<nlohmann::json> parse_python_literal(std::string_view text);

}  // namespace tandem
