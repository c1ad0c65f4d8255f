// The compiled pipeline: shapes, where steps may go, the fused JPEG decode (cropped and
// scaled) and the row-wise PNG decode against decode-then-transform, the pixel limit on
// headers, the folded final flip, and uint8 conversion.
#include <cmath>
#include <cstring>
#include <set>

#include <gtest/gtest.h>

#include "image_fixtures.h"
#include "tandem/common/error.h"
#include "tandem/data/batching/convert.h"
#include "tandem/data/codecs/jpeg.h"
#include "tandem/data/codecs/pixel_limit.h"
#include "tandem/data/codecs/png.h"
#include "tandem/data/augment/pipeline.h"
#include "tandem/data/augment/resample.h"

namespace tandem::data {
namespace {

using testing::encode_jpeg;
using testing::encode_png;
using testing::gradient_image;
using testing::jpeg_declaring;
using testing::png_declaring;

const PipelineSource kFiles{true, 3, 0, 0};

std::vector<uint8_t> run(const Pipeline& p, const std::vector<uint8_t>& file, uint64_t key) {
  std::vector<uint8_t> out(p.sample_bytes());
  Rng rng(kAugmentStream, 1, 0, key);
  p.run_file(file, rng, out.data());
  return out;
}

std::string compile_error(const std::string& spec, PipelineSource source = kFiles) {
  try {
    Pipeline(parse_pipeline(spec), source);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

int max_difference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  int worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(int(a[i]) - int(b[i])));
  return worst;
}

TEST(Pipeline, OutputShapeFollowsTheSteps) {
  EXPECT_EQ(Pipeline(parse_pipeline("decode,random_resized_crop(224),hflip"), kFiles).sample_shape(),
            (std::vector<int64_t>{3, 224, 224}));
  EXPECT_EQ(Pipeline(parse_pipeline("decode(channels=1),resize(64,48)"), kFiles).sample_shape(),
            (std::vector<int64_t>{1, 64, 48}));
  EXPECT_EQ(Pipeline(parse_pipeline("resize(256),center_crop(224,200)"), kFiles).sample_shape(),
            (std::vector<int64_t>{3, 224, 200}));
  // raw 28x28 gray images: fixed size without any step, smaller-edge resize is known too
  EXPECT_EQ(Pipeline(parse_pipeline(""), {false, 1, 28, 28}).sample_shape(), (std::vector<int64_t>{1, 28, 28}));
  EXPECT_EQ(Pipeline(parse_pipeline("decode(channels=3),resize(56)"), {false, 1, 28, 14}).sample_shape(),
            (std::vector<int64_t>{3, 112, 56}));
}

TEST(Pipeline, MisplacedStepsAndVaryingSizesAreConfigErrors) {
  EXPECT_NE(compile_error("decode,hflip").find("output size would vary"), std::string::npos);
  EXPECT_NE(compile_error("decode,resize(100)").find("output size would vary"), std::string::npos);
  EXPECT_NE(compile_error("hflip,decode,center_crop(8)").find("decode must be the first step"), std::string::npos);
  EXPECT_NE(compile_error("to_uint8,center_crop(8)").find("to_uint8 must be the last"), std::string::npos);
  EXPECT_NE(compile_error("center_crop(8),normalize(0.5,0.5)").find("normalize needs 3 mean"), std::string::npos);
  EXPECT_NE(compile_error("gaussian_blur(9)", {false, 1, 4, 4}).find("too large"), std::string::npos);
}

TEST(Pipeline, NormalizeSetsMeanAndStdWithoutChangingBytes) {
  const Pipeline plain(parse_pipeline("decode,center_crop(16)"), kFiles);
  const Pipeline normalised(parse_pipeline("decode,center_crop(16),normalize(0.1,0.2,0.3,0.4,0.5,0.6),to_uint8"), kFiles);
  EXPECT_TRUE(plain.mean().empty());
  EXPECT_EQ(normalised.mean(), (std::vector<float>{0.1f, 0.2f, 0.3f}));
  EXPECT_EQ(normalised.stddev(), (std::vector<float>{0.4f, 0.5f, 0.6f}));
  const std::vector<uint8_t> file = encode_jpeg(gradient_image(30, 40, 3, 1));
  EXPECT_EQ(run(plain, file, 0), run(normalised, file, 0));
}

TEST(Pipeline, FusedUnscaledJpegDecodeEqualsDecodeThenCrop) {
  // decode(scaled=0): the fused path decodes only the crop box, which must give exactly what
  // decoding the whole file (as a PNG of the decoded pixels) and then cropping gives.
  const std::vector<uint8_t> jpeg = encode_jpeg(gradient_image(150, 200, 3, 2), 85);
  const ImageSize size = jpeg_size(jpeg);
  JpegRegion full;
  decode_jpeg(jpeg, 3, {0, 0, size.height, size.width}, 1, full);
  full.image.reshape(150, 200, 3);
  const std::vector<uint8_t> png = encode_png(full.image, PNG_FORMAT_RGB);
  for (const char* spec : {"decode(scaled=0),random_resized_crop(64),hflip", "decode(scaled=0),resize(50),center_crop(48)",
                           "decode(scaled=0),resize(37,29),rotation(30)"}) {
    const Pipeline p(parse_pipeline(spec), kFiles);
    for (uint64_t key = 0; key < 20; ++key) ASSERT_EQ(run(p, jpeg, key), run(p, png, key)) << spec << " key " << key;
  }
}

// What the pipeline made of `file` when decoded whole first: decode_png, then the same
// steps on the raw image (the path every PNG took before the row-wise decode).
std::vector<uint8_t> run_decoded(const std::string& spec, const std::vector<uint8_t>& file, int channels,
                                 uint64_t key) {
  Image image;
  decode_png(file, channels, image);
  const Pipeline p(parse_pipeline(spec), {false, channels, image.height, image.width});
  std::vector<uint8_t> out(p.sample_bytes());
  Rng rng(kAugmentStream, 1, 0, key);
  p.run_image(image, rng, out.data());
  return out;
}

TEST(Pipeline, RowWisePngDecodeEqualsDecodeThenTransform) {
  // The same resampling fed row by row: exactly the bytes of the whole-image path, for
  // crops, resizes, a gray file, a downscale of more than 30x (the two-stage resample)
  // and an interlaced file (decoded whole).
  testing::TempDir dir;
  testing::write_pattern_png(dir.path() / "big.png", 2400, 1300);
  testing::write_pattern_png(dir.path() / "interlaced.png", 300, 200, true);
  const std::vector<uint8_t> rgb = encode_png(gradient_image(150, 200, 3, 2), PNG_FORMAT_RGB);
  const std::vector<uint8_t> gray = encode_png(gradient_image(90, 70, 1, 3), PNG_FORMAT_GRAY);
  const std::vector<uint8_t> big = testing::read_bytes(dir.path() / "big.png");
  const std::vector<uint8_t> interlaced = testing::read_bytes(dir.path() / "interlaced.png");
  const struct {
    const char* spec;
    const std::vector<uint8_t>& file;
    int channels;
  } cases[] = {
      {"decode,random_resized_crop(64),hflip", rgb, 3},
      {"decode,resize(50),center_crop(48)", rgb, 3},
      {"decode,resize(37,29),rotation(30)", rgb, 3},
      {"decode,resize(300,400)", rgb, 3},  // upscaling
      {"decode(channels=1),random_resized_crop(24)", gray, 1},
      {"decode(channels=3),resize(20,16)", gray, 3},
      {"decode,resize(20,32)", big, 3},  // 65x down in height: two stages
      {"decode,random_resized_crop(16)", big, 3},
      {"decode,random_resized_crop(32)", interlaced, 3},
  };
  for (const auto& c : cases) {
    const Pipeline p(parse_pipeline(c.spec), kFiles);
    for (uint64_t key = 0; key < 6; ++key) {
      ASSERT_EQ(run(p, c.file, key), run_decoded(c.spec, c.file, c.channels, key)) << c.spec << " key " << key;
    }
  }
}

TEST(Pipeline, HeadersOverThePixelLimitAreRefusedBeforeDecoding) {
  const Pipeline p(parse_pipeline("decode,random_resized_crop(32)"), kFiles);
  const Pipeline whole(parse_pipeline("decode,center_crop(32)"), kFiles);
  const std::vector<uint8_t> png_bomb = png_declaring(100000, 100000);
  EXPECT_LT(png_bomb.size(), 100u);
  for (const std::vector<uint8_t>& file : {png_bomb, png_declaring(40000, 40000), jpeg_declaring(60000, 60000)}) {
    for (const Pipeline* pipeline : {&p, &whole}) {
      try {
        run(*pipeline, file, 0);  // without the limit: a 4.8 to 30 GB allocation, or std::bad_alloc
        ADD_FAILURE() << "accepted";
      } catch (const ImageTooLarge& e) {
        EXPECT_NE(std::string(e.what()).find("pixels), more than --max-image-pixels 89478485"), std::string::npos)
            << e.what();
      }
    }
  }
  // The limit is inclusive, and applies to JPEG and PNG alike.
  const Image img = gradient_image(40, 50, 3, 1);
  for (const std::vector<uint8_t>& file : {encode_png(img, PNG_FORMAT_RGB), encode_jpeg(img)}) {
    const Pipeline fits(parse_pipeline("decode,resize(8,8)"), {true, 3, 0, 0, 2000});
    const Pipeline over(parse_pipeline("decode,resize(8,8)"), {true, 3, 0, 0, 1999});
    EXPECT_NO_THROW(run(fits, file, 0));
    try {
      run(over, file, 0);
      ADD_FAILURE() << "a 50 x 40 image accepted under a limit of 1999 pixels";
    } catch (const ImageTooLarge& e) {
      EXPECT_NE(std::string(e.what()).find("a 50 x 40 image (2000 pixels), more than --max-image-pixels 1999"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(Pipeline, ScaledJpegDecodeStaysCloseToFullResolution) {
  // A 1/4-scale decode when the crop is 4x the output: DCT scaling instead of a wide filter.
  const std::vector<uint8_t> jpeg = encode_jpeg(gradient_image(480, 640, 3, 3), 95);
  const Pipeline scaled(parse_pipeline("decode,resize(120,160)"), kFiles);
  const Pipeline exact(parse_pipeline("decode(scaled=0),resize(120,160)"), kFiles);
  const std::vector<uint8_t> a = run(scaled, jpeg, 0), b = run(exact, jpeg, 0);
  EXPECT_NE(a, b);  // it did take the other path
  double mean = 0;
  for (size_t i = 0; i < a.size(); ++i) mean += std::abs(int(a[i]) - int(b[i]));
  EXPECT_LT(mean / a.size(), 2.0);
  EXPECT_LE(max_difference(a, b), 24);
}

TEST(Pipeline, FinalFlipIsFoldedIntoTheCopyWithTheSameDraw) {
  // hflip(p=1) last (folded) against hflip(p=1) before an identity-size center crop (applied).
  const std::vector<uint8_t> jpeg = encode_jpeg(gradient_image(40, 60, 3, 4));
  const Pipeline folded(parse_pipeline("decode,resize(32,48),hflip(1)"), kFiles);
  const Pipeline applied(parse_pipeline("decode,resize(32,48),hflip(1),center_crop(32,48)"), kFiles);
  const Pipeline none(parse_pipeline("decode,resize(32,48)"), kFiles);
  const std::vector<uint8_t> f = run(folded, jpeg, 0), a = run(applied, jpeg, 0), n = run(none, jpeg, 0);
  EXPECT_EQ(f, a);
  EXPECT_NE(f, n);
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 32; ++y) EXPECT_EQ(f[(c * 32 + y) * 48], n[(c * 32 + y) * 48 + 47]);
}

TEST(Pipeline, AFlipBeforeColourStepsIsFoldedIntoTheCopyWithTheSameBytes) {
  // hflip before color_jitter (folded: jitter works per pixel, contrast's mean is the same
  // flipped) against the same with an identity-size center crop after the flip (applied),
  // over keys that flip and keys that do not; two flips cancel.
  const std::vector<uint8_t> jpeg = encode_jpeg(gradient_image(40, 60, 3, 4));
  const std::string jitter = "color_jitter(brightness=0.4,contrast=0.4,saturation=0.4,hue=0.1)";
  const Pipeline folded(parse_pipeline("decode,resize(32,48),hflip," + jitter), kFiles);
  const Pipeline applied(parse_pipeline("decode,resize(32,48),hflip,center_crop(32,48)," + jitter), kFiles);
  const Pipeline twice(parse_pipeline("decode,resize(32,48),hflip(1)," + jitter + ",hflip(1)"), kFiles);
  const Pipeline twice_applied(parse_pipeline("decode,resize(32,48),hflip(1),center_crop(32,48)," + jitter +
                                              ",hflip(1),center_crop(32,48)"),
                               kFiles);
  for (uint64_t key = 0; key < 8; ++key) {
    EXPECT_EQ(run(folded, jpeg, key), run(applied, jpeg, key)) << "key " << key;
    EXPECT_EQ(run(twice, jpeg, key), run(twice_applied, jpeg, key)) << "key " << key;
  }
}

// RandomCrop's padding as F.pad makes it, on one row 10 20 30 padded by 2 on each side:
// constant (fill), edge, reflect (about the edge pixel) and symmetric (about the edge).
TEST(Pipeline, RandomCropPadsAsTorchvisionDoes) {
  Image row;
  row.reshape(1, 3, 1);
  row.pixels[0] = 10, row.pixels[1] = 20, row.pixels[2] = 30;
  const std::vector<std::pair<PadMode, std::vector<uint8_t>>> cases = {
      {PadMode::kConstant, {7, 7, 10, 20, 30, 7, 7}},
      {PadMode::kEdge, {10, 10, 10, 20, 30, 30, 30}},
      {PadMode::kReflect, {30, 20, 10, 20, 30, 20, 10}},
      {PadMode::kSymmetric, {20, 10, 10, 20, 30, 30, 20}},
  };
  for (const auto& [mode, want] : cases) {
    RandomCropOptions o{.height = 1, .width = 7, .pad = {2, 0, 2, 0}, .fill = 7, .mode = mode};
    Image out;
    Rng rng(1, 2);
    random_crop(row, o, rng, out);  // the padded image is the crop's size: no draw
    EXPECT_EQ(std::vector<uint8_t>(out.pixels.begin(), out.pixels.begin() + 7), want);
  }
  // Crops land at every offset the padded image allows, and only there; pad_if_needed
  // pads a short side by its shortfall on both sides; too small without it is a DataError.
  Image image;
  image.reshape(4, 4, 1);
  for (int i = 0; i < 16; ++i) image.pixels[static_cast<size_t>(i)] = static_cast<uint8_t>(100 + i);
  std::set<int> corners;
  for (uint64_t k = 0; k < 400; ++k) {
    Rng rng(3, k);
    Image out;
    random_crop(image, {.height = 3, .width = 3, .pad = {1, 1, 1, 1}}, rng, out);
    corners.insert(out.pixels[0]);
  }
  EXPECT_EQ(corners, (std::set<int>{0, 100, 101, 102, 104, 105, 106, 108, 109, 110}));
  Image out;
  Rng rng(4, 5);
  random_crop(image, {.height = 6, .width = 4, .pad_if_needed = true}, rng, out);
  EXPECT_EQ(out.height, 6);
  EXPECT_THROW(random_crop(image, {.height = 6, .width = 4}, rng, out), DataError);
}

// vflip and random_grayscale with p=1: rows reversed; every channel the grey level.
TEST(Pipeline, VerticalFlipAndGrayscale) {
  const std::vector<uint8_t> jpeg = encode_jpeg(gradient_image(40, 60, 3, 4));
  const std::vector<uint8_t> none = run(Pipeline(parse_pipeline("decode,resize(32,48)"), kFiles), jpeg, 0);
  const std::vector<uint8_t> flipped = run(Pipeline(parse_pipeline("decode,resize(32,48),vflip(1)"), kFiles), jpeg, 0);
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 32; ++y) EXPECT_EQ(flipped[(c * 32 + y) * 48 + 5], none[(c * 32 + 31 - y) * 48 + 5]);
  const std::vector<uint8_t> gray =
      run(Pipeline(parse_pipeline("decode,resize(32,48),random_grayscale(1)"), kFiles), jpeg, 0);
  for (size_t i = 0; i < 32 * 48; ++i) {
    const float level = 0.2989f * none[i] + 0.587f * none[32 * 48 + i] + 0.114f * none[2 * 32 * 48 + i];
    ASSERT_EQ(gray[i], static_cast<uint8_t>(level)) << i;
    ASSERT_EQ(gray[32 * 48 + i], gray[i]);
    ASSERT_EQ(gray[2 * 32 * 48 + i], gray[i]);
  }
}

// random_choice applies one of its steps by weight; random_order all of them, each once.
TEST(Pipeline, RandomChoicePicksByWeightAndRandomOrderRunsEveryStep) {
  const std::vector<uint8_t> jpeg = encode_jpeg(gradient_image(40, 60, 3, 4));
  const std::vector<uint8_t> none = run(Pipeline(parse_pipeline("decode,resize(32,48)"), kFiles), jpeg, 0);
  const std::vector<uint8_t> h = run(Pipeline(parse_pipeline("decode,resize(32,48),hflip(1)"), kFiles), jpeg, 0);
  const std::vector<uint8_t> v = run(Pipeline(parse_pipeline("decode,resize(32,48),vflip(1)"), kFiles), jpeg, 0);
  const std::vector<uint8_t> hv =
      run(Pipeline(parse_pipeline("decode,resize(32,48),hflip(1),vflip(1)"), kFiles), jpeg, 0);
  const Pipeline choice(parse_pipeline("[\"decode\", \"resize(32,48)\", {\"op\": \"random_choice\", "
                                       "\"steps\": [\"hflip(1)\", \"vflip(1)\"], \"p\": [3, 1]}]"),
                        kFiles);
  const Pipeline order(parse_pipeline("[\"decode\", \"resize(32,48)\", {\"op\": \"random_order\", "
                                      "\"steps\": [\"hflip(1)\", \"vflip(1)\"]}]"),
                       kFiles);
  int flipped = 0;
  for (uint64_t key = 0; key < 400; ++key) {
    const std::vector<uint8_t> c = run(choice, jpeg, key);
    ASSERT_TRUE(c == h || c == v) << "key " << key;
    flipped += c == h;
    ASSERT_EQ(run(order, jpeg, key), hv) << "key " << key;  // the two flips commute
  }
  EXPECT_NEAR(flipped / 400.0, 0.75, 4 * std::sqrt(0.75 * 0.25 / 400));
  EXPECT_NE(h, none);
}

TEST(Pipeline, GrayRawImagesExpandToThreeChannels) {
  const Pipeline p(parse_pipeline("decode(channels=3)"), {false, 1, 5, 4});
  const Image gray = gradient_image(5, 4, 1, 5);
  std::vector<uint8_t> out(p.sample_bytes());
  Rng rng(1);
  p.run_image(gray, rng, out.data());
  for (int c = 0; c < 3; ++c) EXPECT_EQ(0, std::memcmp(out.data() + c * 20, gray.pixels.data(), 20));
}

TEST(Pipeline, EveryStepIsAFunctionOfTheKey) {
  const std::vector<uint8_t> jpeg = encode_jpeg(gradient_image(90, 120, 3, 6));
  const Pipeline p(parse_pipeline("decode,random_resized_crop(48),hflip,color_jitter(0.4,0.4,0.4,0.1),"
                                  "gaussian_blur(5,0.1,2,0.5),rotation(15),to_uint8"), kFiles);
  std::set<std::vector<uint8_t>> distinct;
  for (uint64_t key = 0; key < 8; ++key) {
    const std::vector<uint8_t> first = run(p, jpeg, key);
    EXPECT_EQ(first, run(p, jpeg, key)) << key;
    distinct.insert(first);
  }
  EXPECT_EQ(distinct.size(), 8u);
}

TEST(Pipeline, NotAnImageIsADecodeError) {
  const Pipeline p(parse_pipeline("decode,center_crop(8)"), kFiles);
  std::vector<uint8_t> out(p.sample_bytes());
  Rng rng(1);
  const std::vector<uint8_t> text = {'G', 'I', 'F', '8', '9', 'a'};
  try {
    p.run_file(text, rng, out.data());
    FAIL();
  } catch (const DecodeError& e) {
    EXPECT_NE(std::string(e.what()).find("not a JPEG or PNG file (it starts with bytes 47 49 46 38)"), std::string::npos)
        << e.what();
  }
}

TEST(Convert, Uint8ToFloatTypesScalesByOneOver255) {
  const uint8_t in[4] = {0, 1, 128, 255};
  float f[4];
  convert_from_uint8(in, 4, DType::kFloat32, reinterpret_cast<std::byte*>(f));
  EXPECT_EQ(f[0], 0.0f);
  EXPECT_FLOAT_EQ(f[2], 128 / 255.0f);
  EXPECT_EQ(f[3], 1.0f);
  uint8_t back[4];
  convert_from_uint8(in, 4, DType::kUInt8, reinterpret_cast<std::byte*>(back));
  EXPECT_EQ(0, std::memcmp(in, back, 4));
  uint16_t half[4];
  convert_from_uint8(in, 4, DType::kFloat16, reinterpret_cast<std::byte*>(half));
  EXPECT_EQ(half[3], 0x3c00);  // 1.0
}

TEST(Convert, WireDtypeDefaultsToTheDatasetsOwn) {
  DataOptions opts;
  EXPECT_EQ(wire_dtype(opts), DType::kFloat32);
  opts.data = "imagefolder:/x";
  EXPECT_EQ(wire_dtype(opts), DType::kUInt8);
  opts.data = "mnist";
  EXPECT_EQ(wire_dtype(opts), DType::kUInt8);
  opts.wire_dtype = "bfloat16";
  EXPECT_EQ(wire_dtype(opts), DType::kBFloat16);
}

}  // namespace
}  // namespace tandem::data

namespace tandem::data {
namespace {

// An image far larger than the pipeline's target: downscaled in steps, not refused at
// the first batch (a pipeline that passed its start-up check used to fail here).
TEST(Resample, DownscalesOfMoreThanThirtyTimesWorkInSteps) {
  Image big;
  big.reshape(4000, 300, 3);
  for (int y = 0; y < big.height; ++y) {
    for (int x = 0; x < big.width * 3; ++x) big.row(y)[x] = static_cast<uint8_t>(y < 2000 ? 40 : 200);
  }
  Image out;
  resize(big, 32, 30, out);
  ASSERT_EQ(out.height, 32);
  ASSERT_EQ(out.width, 30);
  EXPECT_NEAR(out.row(2)[0], 40, 1);    // top half dark
  EXPECT_NEAR(out.row(29)[0], 200, 1);  // bottom half bright
}

}  // namespace
}  // namespace tandem::data
