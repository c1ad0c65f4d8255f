// --pipeline parsing: both forms, defaults, the canonical text, and errors that name the step.
#include <gtest/gtest.h>

#include "tandem/common/error.h"
#include "tandem/data/augment/pipeline_spec.h"

namespace tandem::data {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_pipeline(text);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(PipelineSpec, ParsesTheListFormWithDefaults) {
  const PipelineSpec spec = parse_pipeline("decode, random_resized_crop(224), hflip, color_jitter(0.4,0.4,0.4), to_uint8");
  ASSERT_EQ(spec.steps.size(), 5u);
  EXPECT_EQ(spec.steps[1].op, "random_resized_crop");
  EXPECT_EQ(spec.steps[1].param("size"), 224);
  EXPECT_DOUBLE_EQ(spec.steps[1].param("scale_min"), 0.08);
  EXPECT_DOUBLE_EQ(spec.steps[1].param("ratio_max"), 4.0 / 3.0);
  EXPECT_EQ(spec.steps[2].param("p"), 0.5);
  EXPECT_DOUBLE_EQ(spec.steps[3].param("saturation"), 0.4);
  EXPECT_EQ(spec.steps[3].param("hue"), 0);
}

TEST(PipelineSpec, NamedParametersAndNewlinesWork) {
  const PipelineSpec spec = parse_pipeline("resize(size=256)\ncenter_crop(224)\ngaussian_blur(kernel_size=5, sigma_max=1.5)");
  ASSERT_EQ(spec.steps.size(), 3u);
  EXPECT_EQ(spec.steps[0].param("width"), 0);
  EXPECT_EQ(spec.steps[2].param("sigma_min"), 0.1);
  EXPECT_EQ(spec.steps[2].param("sigma_max"), 1.5);
}

TEST(PipelineSpec, JsonListEqualsTheTextForm) {
  const PipelineSpec a = parse_pipeline(R"js(["decode", "random_resized_crop(224)", {"op": "hflip", "p": 0.5},
                                           {"op": "color_jitter", "brightness": 0.4}, {"op": "normalize", "args": [0.5, 0.25]}])js");
  const PipelineSpec b = parse_pipeline("decode,random_resized_crop(size=224),hflip,color_jitter(brightness=0.4),normalize(0.5,0.25)");
  EXPECT_EQ(a.canonical(), b.canonical());
  EXPECT_EQ(a.steps.size(), 5u);
}

TEST(PipelineSpec, CanonicalTextNamesEveryParameterAndIsStable) {
  const std::string c = parse_pipeline("hflip(0.25),rotation(10)").canonical();
  EXPECT_EQ(c, "hflip(p=0.25),rotation(degrees=10)");
  EXPECT_EQ(parse_pipeline(c).canonical(), c);
  EXPECT_NE(parse_pipeline("hflip").canonical(), parse_pipeline("hflip(0.6)").canonical());
}

TEST(PipelineSpec, EmptyTextIsAnEmptyPipeline) {
  EXPECT_TRUE(parse_pipeline("").steps.empty());
  EXPECT_TRUE(parse_pipeline("  ").steps.empty());
}

TEST(PipelineSpec, ErrorsNameTheStepAndTheProblem) {
  EXPECT_NE(error_of("decode,random_perspective(3)").find("unknown step 'random_perspective'"), std::string::npos);
  EXPECT_NE(error_of("random_resized_crop").find("'size' is required"), std::string::npos);
  EXPECT_NE(error_of("hflip(p=2)").find("p must be in [0, 1]"), std::string::npos);
  EXPECT_NE(error_of("hflip(q=0.5)").find("no parameter 'q'"), std::string::npos);
  EXPECT_NE(error_of("color_jitter(hue=0.7)").find("hue"), std::string::npos);
  EXPECT_NE(error_of("gaussian_blur(4)").find("odd"), std::string::npos);
  EXPECT_NE(error_of("resize(abc)").find("'abc' is not a number"), std::string::npos);
  EXPECT_NE(error_of("resize(10").find("unbalanced"), std::string::npos);
  EXPECT_NE(error_of("decode,,hflip").find("empty step"), std::string::npos);
  EXPECT_NE(error_of("[\"decode\", 3]").find("\"op\""), std::string::npos);
  EXPECT_NE(error_of("normalize(0.5)").find("normalize takes"), std::string::npos);
  EXPECT_NE(error_of("resize(0)").find("size must be"), std::string::npos);
  EXPECT_NE(error_of("hflip(0.5, 3)").find("at most 1"), std::string::npos);
  EXPECT_NE(error_of("decode,hfilp").find("did you mean 'hflip'?"), std::string::npos) << error_of("decode,hfilp");
  EXPECT_NE(error_of("random_resized_crop(64, scale=(0.2, 0.5, 1))").find("scale takes two values"), std::string::npos);
}

// torchvision's own argument names and tuples read as tandem's: what a torchvision
// transform says is what the step says.
TEST(PipelineSpec, TorchvisionArgumentNamesAndTuples) {
  const PipelineSpec a = parse_pipeline("random_resized_crop(64, scale=(0.2, 1.0), ratio=[0.5, 2.0]),"
                                        "gaussian_blur(5, sigma=(0.5, 1.5)), gaussian_blur(3, sigma=0.8),"
                                        "resize(size=(48, 64)), random_erasing(scale=(0.05, 0.2))");
  const PipelineSpec b = parse_pipeline("random_resized_crop(64, scale_min=0.2, scale_max=1.0, ratio_min=0.5, ratio_max=2),"
                                        "gaussian_blur(5, sigma_min=0.5, sigma_max=1.5), gaussian_blur(3, 0.8, 0.8),"
                                        "resize(48, width=64), random_erasing(scale_min=0.05, scale_max=0.2)");
  EXPECT_EQ(a.canonical(), b.canonical());
  EXPECT_DOUBLE_EQ(a.steps[0].param("scale_min"), 0.2);
  EXPECT_DOUBLE_EQ(a.steps[0].param("ratio_max"), 2.0);
  EXPECT_DOUBLE_EQ(a.steps[3].param("width"), 64);
  // RandomCrop's padding: one value, (left/right, top/bottom) or (left, top, right, bottom).
  for (const auto& [text, sides] : std::vector<std::pair<std::string, std::vector<double>>>{
           {"random_crop(32, padding=4)", {4, 4, 4, 4}},
           {"random_crop(32, padding=(1, 2))", {1, 2, 1, 2}},
           {"random_crop(32, padding=(1, 2, 3, 4), padding_mode=reflect)", {1, 2, 3, 4}}}) {
    const StepSpec s = parse_pipeline(text).steps[0];
    EXPECT_EQ((std::vector<double>{s.param("padding_left"), s.param("padding_top"), s.param("padding_right"),
                                   s.param("padding_bottom")}),
              sides)
        << text;
  }
  EXPECT_NE(error_of("random_crop(32, padding=(1, 2, 3))").find("padding takes 1, 2 or 4 values"), std::string::npos);
  EXPECT_NE(error_of("random_crop(32, fill=300)").find("fill must be a whole number in [0, 255]"), std::string::npos);
}

// RandomChoice and RandomOrder as JSON steps holding steps that keep the size; weights
// normalised to sum 1 (equal when none are given).
TEST(PipelineSpec, RandomChoiceAndRandomOrderHoldSteps) {
  const std::string both = "[{\"op\": \"random_choice\", \"steps\": [\"hflip(1)\", {\"op\": \"vflip\"}], "
                           "\"p\": [3, 1]}, {\"op\": \"random_order\", \"steps\": [\"hflip\", \"vflip\"]}]";
  const PipelineSpec a = parse_pipeline(both);
  ASSERT_EQ(a.steps.size(), 2u);
  EXPECT_EQ(a.steps[0].params, (std::vector<double>{0.75, 0.25}));
  EXPECT_EQ(a.steps[0].steps[1].op, "vflip");
  EXPECT_EQ(a.canonical(), "random_choice(p=0.75;0.25,steps=[hflip(p=1)|vflip(p=0.5)]),"
                           "random_order(steps=[hflip(p=0.5)|vflip(p=0.5)])");
  const std::string equal = "[{\"op\": \"random_choice\", \"steps\": [\"hflip\", \"vflip\"]}]";
  EXPECT_EQ(parse_pipeline(equal).steps[0].params, (std::vector<double>{0.5, 0.5}));
  const std::string resizing = "[{\"op\": \"random_choice\", \"steps\": [\"center_crop(8)\"]}]";
  EXPECT_NE(error_of(resizing).find("changes the image's size"), std::string::npos);
  const std::string weights = "[{\"op\": \"random_choice\", \"steps\": [\"hflip\"], \"p\": [1, 2]}]";
  EXPECT_NE(error_of(weights).find("one weight per step"), std::string::npos);
  EXPECT_NE(error_of("random_order(hflip)").find("in the JSON form"), std::string::npos);
}

}  // namespace
}  // namespace tandem::data
