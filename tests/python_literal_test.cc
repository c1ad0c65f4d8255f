// SageMaker's generic Estimator sends str() of a list or dict hyperparameter; tandem reads
// those Python literals as the JSON the framework estimators would have sent.
#include <gtest/gtest.h>

#include "tandem/common/python_literal.h"

namespace tandem {
namespace {

nlohmann::json read(const std::string& text) {
  std::optional<nlohmann::json> j = parse_python_literal(text);
  EXPECT_TRUE(j.has_value()) << text;
  return j.value_or(nlohmann::json());
}

TEST(PythonLiteral, WhatStrWritesOfListsAndDicts) {
  EXPECT_EQ(read("['--epochs', '90', '--lr', '0.5']"), nlohmann::json({"--epochs", "90", "--lr", "0.5"}));
  EXPECT_EQ(read("{'root': '/opt/ml/input/data/train', 'size': 64, 'scale': 0.5, 'shuffle': True, 'x': None}"),
            nlohmann::json::parse(R"({"root": "/opt/ml/input/data/train", "size": 64, "scale": 0.5,
                                      "shuffle": true, "x": null})"));
  EXPECT_EQ(read("[]"), nlohmann::json::array());
  EXPECT_EQ(read("{}"), nlohmann::json::object());
  EXPECT_EQ(read("(1, 2)"), nlohmann::json({1, 2}));
  EXPECT_EQ(read("(1,)"), nlohmann::json({1}));
  EXPECT_EQ(read("[-3, 1e-3, +2]"), nlohmann::json::parse("[-3, 0.001, 2]"));
  EXPECT_EQ(read("{'a': [1, {'b': (False,)}]}"), nlohmann::json::parse(R"({"a": [1, {"b": [false]}]})"));
  EXPECT_EQ(read("{1: 'one'}"), nlohmann::json::parse(R"({"1": "one"})"));
}

TEST(PythonLiteral, StringsAsPythonQuotesThem) {
  // str() uses double quotes around a string holding a single quote, and escapes as repr does.
  EXPECT_EQ(read(R"(["it's", 'a "b"', 'tab\there', 'back\\slash', '\xe9', '\u20ac'])"),
            nlohmann::json({"it's", "a \"b\"", "tab\there", "back\\slash", "\xc3\xa9", "\xe2\x82\xac"}));
}

TEST(PythonLiteral, AnythingElseIsNotALiteral) {
  for (const char* bad : {"['a', 'b'", "['a' 'b']", "[a, b]", "['a',, 'b']", "{'a' 1}", "{'a': 1} x", "['a\\",
                          "{[1]: 2}", "", "true", "[1, 2]]", "[--epochs]"}) {
    EXPECT_FALSE(parse_python_literal(bad).has_value()) << bad;
  }
  EXPECT_FALSE(parse_python_literal(std::string(200, '[') + std::string(200, ']')).has_value()) << "too deep";
}

}  // namespace
}  // namespace tandem
