// JPEG and PNG decoding: full and cropped JPEG decodes agree, scaled decodes have the
// promised size, PNG colour types convert as torchvision's decode_png does, and bad bytes
// are DecodeErrors that say what is wrong.
#include <gtest/gtest.h>

#include <jpeglib.h>

#include "image_fixtures.h"
#include "tandem/data/codecs/jpeg.h"
#include "tandem/data/codecs/png.h"

namespace tandem::data {
namespace {

using testing::encode_jpeg;
using testing::encode_png;
using testing::gradient_image;

Image decode_full(const std::vector<uint8_t>& file, int channels) {
  const ImageSize size = jpeg_size(file);
  JpegRegion region;
  decode_jpeg(file, channels, {0, 0, size.height, size.width}, 1, region);
  EXPECT_EQ(region.top, 0);
  EXPECT_EQ(region.left, 0);
  return region.image;
}

// A build whose jconfig.h came from another libjpeg (what happened on the GPU machine: the
// packed Debian library with the system's Ubuntu jconfig.h) used to longjmp through a jump
// buffer never set, a crash with a corrupted stack pointer. Now it is one clear error.
TEST(Jpeg, HeadersOfAnotherLibjpegAreAClearError) {
  EXPECT_NO_THROW(check_jpeg_library(JPEG_LIB_VERSION, sizeof(jpeg_decompress_struct)));
  try {
    check_jpeg_library(JPEG_LIB_VERSION == 80 ? 62 : 80, sizeof(jpeg_decompress_struct));
    FAIL() << "another JPEG_LIB_VERSION was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("Wrong JPEG library version"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("jconfig.h"), std::string::npos) << e.what();
  }
  EXPECT_THROW(check_jpeg_library(JPEG_LIB_VERSION, sizeof(jpeg_decompress_struct) + 8), std::runtime_error);
}

TEST(Jpeg, DecodesCloseToTheEncodedImage) {
  const Image img = gradient_image(37, 53, 3, 1);
  const std::vector<uint8_t> file = encode_jpeg(img, 98);
  ASSERT_TRUE(is_jpeg(file));
  const ImageSize size = jpeg_size(file);
  EXPECT_EQ(size.height, 37);
  EXPECT_EQ(size.width, 53);
  const Image out = decode_full(file, 3);
  ASSERT_EQ(out.height, 37);
  ASSERT_EQ(out.width, 53);
  double err = 0;
  for (size_t i = 0; i < img.bytes(); ++i) err += std::abs(int(out.pixels[i]) - int(img.pixels[i]));
  EXPECT_LT(err / img.bytes(), 4.0);
}

TEST(Jpeg, CroppedDecodeEqualsTheSameRegionOfAFullDecode) {
  for (bool progressive : {false, true}) {
    const std::vector<uint8_t> file = encode_jpeg(gradient_image(120, 170, 3, 2), 90, progressive);
    const Image full = decode_full(file, 3);
    for (const CropBox box : {CropBox{17, 33, 50, 71}, CropBox{0, 0, 120, 170}, CropBox{101, 150, 19, 20},
                              CropBox{40, 0, 9, 5}, CropBox{32, 48, 33, 31}, CropBox{16, 16, 16, 16}, CropBox{1, 1, 1, 1}}) {
      JpegRegion region;
      decode_jpeg(file, 3, box, 1, region);
      ASSERT_LE(region.left, box.left);
      ASSERT_LE(region.top, box.top);
      ASSERT_GE(region.left + region.image.width, box.left + box.width);
      ASSERT_GE(region.top + region.image.height, box.top + box.height);
      for (int y = box.top; y < box.top + box.height; ++y)
        for (int x = box.left; x < box.left + box.width; ++x)
          for (int c = 0; c < 3; ++c)
            ASSERT_EQ(region.image.row(y - region.top)[(x - region.left) * 3 + c], full.row(y)[x * 3 + c])
                << "progressive " << progressive << " box " << box.top << "," << box.left << " at " << y << "," << x;
    }
  }
}

TEST(Jpeg, ScaledDecodeHasTheScaledSize) {
  const std::vector<uint8_t> file = encode_jpeg(gradient_image(375, 500, 3, 3));
  for (int denom : {2, 4, 8}) {
    JpegRegion region;
    decode_jpeg(file, 3, {0, 0, 375, 500}, denom, region);
    EXPECT_EQ(region.scaled_height, jpeg_scaled(375, denom));
    EXPECT_EQ(region.scaled_width, jpeg_scaled(500, denom));
    EXPECT_EQ(region.image.height, region.scaled_height);
  }
}

TEST(Jpeg, GrayFilesDecodeToRgbAndRgbFilesToGray) {
  const Image gray = gradient_image(20, 30, 1, 4);
  const Image rgb_of_gray = decode_full(encode_jpeg(gray, 100), 3);
  ASSERT_EQ(rgb_of_gray.channels, 3);
  for (int i = 0; i < 20 * 30; ++i) {
    EXPECT_EQ(rgb_of_gray.pixels[i * 3], rgb_of_gray.pixels[i * 3 + 1]);
    EXPECT_EQ(rgb_of_gray.pixels[i * 3], rgb_of_gray.pixels[i * 3 + 2]);
  }
  const Image gray_of_rgb = decode_full(encode_jpeg(gradient_image(20, 30, 3, 5)), 1);
  EXPECT_EQ(gray_of_rgb.channels, 1);
  EXPECT_EQ(gray_of_rgb.height, 20);
}

TEST(Jpeg, AdobeCmykFilesConvertAsPilDoes) {
  // Adobe CMYK JPEGs store inverted ink: (255, 0, 0, 255) is C=0 M=255 Y=255 K=0, red.
  Image ink;
  ink.reshape(16, 16, 4);
  for (size_t i = 0; i < 16 * 16; ++i) {
    uint8_t* p = ink.pixels.data() + i * 4;
    p[0] = 255, p[1] = 0, p[2] = 0, p[3] = 255;
  }
  const std::vector<uint8_t> file = encode_jpeg(ink, 100);
  const Image rgb = decode_full(file, 3);
  ASSERT_EQ(rgb.channels, 3);
  EXPECT_GE(rgb.pixels[0], 250);
  EXPECT_LE(rgb.pixels[1], 5);
  EXPECT_LE(rgb.pixels[2], 5);
  const Image gray = decode_full(file, 1);
  EXPECT_NEAR(gray.pixels[0], 76, 3);  // 0.299 * 255
}

TEST(Jpeg, TruncatedAndGarbageDataAreDecodeErrors) {
  const std::vector<uint8_t> file = encode_jpeg(gradient_image(64, 64, 3, 6));
  std::vector<uint8_t> truncated(file.begin(), file.begin() + file.size() / 2);
  JpegRegion region;
  try {
    decode_jpeg(truncated, 3, {0, 0, 64, 64}, 1, region);
    FAIL() << "a truncated JPEG decoded";
  } catch (const DecodeError& e) {
    EXPECT_NE(std::string(e.what()).find("Premature end"), std::string::npos) << e.what();
  }
  std::vector<uint8_t> garbage = {0xFF, 0xD8, 0xFF, 0x00, 1, 2, 3};
  EXPECT_THROW(jpeg_size(garbage), DecodeError);
  EXPECT_THROW(jpeg_size(std::vector<uint8_t>{}), DecodeError);
  // the decoder is reusable after an error
  EXPECT_EQ(decode_full(file, 3).width, 64);
}

TEST(Png, RgbGrayPaletteAlphaAndSixteenBitDecode) {
  const Image rgb = gradient_image(13, 17, 3, 7);
  Image out;
  decode_png(encode_png(rgb, PNG_FORMAT_RGB), 3, out);
  ASSERT_EQ(out.height, 13);
  EXPECT_TRUE(std::equal(rgb.pixels.begin(), rgb.pixels.begin() + rgb.bytes(), out.pixels.begin()));
  // gray -> RGB repeats the value
  const Image gray = gradient_image(9, 11, 1, 8);
  decode_png(encode_png(gray, PNG_FORMAT_GRAY), 3, out);
  for (int i = 0; i < 99; ++i) EXPECT_EQ(out.pixels[i * 3 + 2], gray.pixels[i]);
  decode_png(encode_png(gray, PNG_FORMAT_GRAY), 1, out);
  EXPECT_TRUE(std::equal(gray.pixels.begin(), gray.pixels.begin() + 99, out.pixels.begin()));
  // RGBA: alpha dropped, colour kept (not composited), like decode_png(mode=RGB)
  Image rgba;
  rgba.reshape(5, 6, 4);
  for (size_t i = 0; i < 30; ++i) rgba.pixels[i * 4] = 200, rgba.pixels[i * 4 + 1] = 100, rgba.pixels[i * 4 + 2] = 50, rgba.pixels[i * 4 + 3] = 7;
  decode_png(encode_png(rgba, PNG_FORMAT_RGBA), 3, out);
  EXPECT_EQ(out.channels, 3);
  EXPECT_EQ(out.pixels[0], 200);
  EXPECT_EQ(out.pixels[1], 100);
  EXPECT_EQ(out.pixels[89], 50);
  // 16-bit linear RGB from the simplified writer becomes 8-bit
  Image wide;
  wide.reshape(4, 4, 6);  // 3 channels x 2 bytes
  std::fill(wide.pixels.begin(), wide.pixels.end(), 0xff);
  decode_png(encode_png(wide, PNG_FORMAT_LINEAR_RGB), 3, out);
  EXPECT_EQ(out.height, 4);
  EXPECT_EQ(out.pixels[0], 255);
}

TEST(Png, CorruptDataIsADecodeError) {
  std::vector<uint8_t> file = encode_png(gradient_image(32, 32, 3, 9), PNG_FORMAT_RGB);
  ASSERT_TRUE(is_png(file));
  Image out;
  std::vector<uint8_t> truncated(file.begin(), file.begin() + file.size() - 40);
  EXPECT_THROW(decode_png(truncated, 3, out), DecodeError);
  file[60] ^= 0xff;  // inside the first IDAT: a CRC error
  EXPECT_THROW(decode_png(file, 3, out), DecodeError);
}

}  // namespace
}  // namespace tandem::data
