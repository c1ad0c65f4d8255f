// The blur must produce torchvision's values for the same sigma. The reference outputs
// come from Debian's torchvision (bench/make_blur_reference.py writes the fixture).
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tandem/data/augment/gaussian_blur.h"

namespace tandem::data {
namespace {

nlohmann::json load_reference() {
  std::ifstream in(std::string(TANDEM_FIXTURES) + "/blur_reference.json");
  return nlohmann::json::parse(in);
}

TEST(TorchvisionReference, KernelMatches) {
  for (const auto& c : load_reference()["cases"]) {
    const auto k = gaussian_kernel1d(c["kernel_size"].get<int>(), c["sigma"].get<float>());
    const auto expected = c["kernel1d"].get<std::vector<float>>();
    ASSERT_EQ(k.size(), expected.size());
    for (size_t i = 0; i < k.size(); ++i) EXPECT_NEAR(k[i], expected[i], 1e-7) << "sigma " << c["sigma"];
  }
}

TEST(TorchvisionReference, GaussianBlurWithinOneInHundredThousand) {
  const auto ref = load_reference();
  ASSERT_GE(ref["cases"].size(), 4u);
  for (const auto& c : ref["cases"]) {
    const auto shape = c["shape"].get<std::vector<int>>();
    std::vector<float> image = c["input"].get<std::vector<float>>();
    const auto expected = c["output"].get<std::vector<float>>();
    std::vector<float> scratch;
    gaussian_blur(image, shape[0], shape[1], shape[2], c["kernel_size"].get<int>(), c["sigma"].get<float>(), scratch);
    double worst = 0;
    for (size_t i = 0; i < image.size(); ++i) worst = std::max(worst, std::abs(double(image[i]) - expected[i]));
    EXPECT_LE(worst, 1e-5) << "shape " << shape[1] << "x" << shape[2] << " sigma " << c["sigma"];
  }
}

}  // namespace
}  // namespace tandem::data
