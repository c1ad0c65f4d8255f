// The decoding half of Pipeline: a file decoded, the first crop fused into the decode
// where it can be (only the crop's rows and a scaled-down JPEG), then the steps.
#include "tandem/data/augment/pipeline.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

#include "tandem/common/error.h"
#include "tandem/data/codecs/jpeg.h"
#include "tandem/data/codecs/pixel_limit.h"
#include "tandem/data/codecs/png.h"
#include "tandem/data/augment/color.h"
#include "tandem/data/augment/gaussian_blur.h"
#include "tandem/data/augment/resample.h"
#include "tandem/data/python/python_step.h"

namespace tandem::data {
namespace {

std::string hex_prefix(std::span<const uint8_t> file) {
  std::string out;
  for (size_t i = 0; i < std::min<size_t>(file.size(), 4); ++i) {
    char buf[4];
    std::snprintf(buf, sizeof buf, "%02x ", file[i]);
    out += buf;
  }
  return file.empty() ? "the file is empty" : "it starts with bytes " + out.substr(0, out.size() - 1);
}

}  // namespace

Pipeline::FirstCrop Pipeline::first_crop(ImageSize size, Rng& rng) const {
  const Step& step = steps_[0];
  FirstCrop c{{0, 0, size.height, size.width}, step.height, step.width};
  if (step.kind == Kind::kRandomResizedCrop) c.box = random_resized_crop_box(size.height, size.width, step.crop, rng);
  else if (step.width == 0) std::tie(c.out_h, c.out_w) = resize_smaller_edge(size.height, size.width, step.height);
  return c;
}

// Decode + the first step (random_resized_crop or resize) of a JPEG: draw the box on the
// header's size, decode only the box at the smallest sufficient scale, resample it.
void Pipeline::decode_fused(std::span<const uint8_t> file, ImageSize size, Image& dst, Rng& rng) const {
  const auto [box, out_h, out_w] = first_crop(size, rng);
  int denom = 1;
  for (int d = 8; scaled_decode_ && d > 1 && denom == 1; d /= 2) {
    const double sx = double(jpeg_scaled(size.width, d)) / size.width, sy = double(jpeg_scaled(size.height, d)) / size.height;
    if (box.width * sx >= out_w && box.height * sy >= out_h) denom = d;
  }
  thread_local JpegRegion region;
  decode_jpeg(file, channels_, box, denom, region);
  const double sx = double(region.scaled_width) / size.width, sy = double(region.scaled_height) / size.height;
  ResampleSource src{region.image.pixels.data(), region.image.stride(), channels_,
                     box.left * sx - region.left, box.top * sy - region.top,
                     (box.left + box.width) * sx - region.left, (box.top + box.height) * sy - region.top,
                     static_cast<int>(box.left * sx) - region.left, static_cast<int>(box.top * sy) - region.top,
                     std::min(static_cast<int>(std::ceil((box.left + box.width) * sx)), region.scaled_width) - region.left,
                     std::min(static_cast<int>(std::ceil((box.top + box.height) * sy)), region.scaled_height) - region.top};
  resample(src, out_h, out_w, dst);
}

namespace {

// A PNG's rows as the resampler asks for them: each decoded once, in order, into one of
// two row buffers; the rows below the last one asked for are never decoded.
class PngRows final : public RowSource {
 public:
  PngRows(PngReader& png, int width, int channels) : png_(png), stride_(static_cast<size_t>(width) * channels) {
    for (auto& b : buffers_) b.resize(stride_ + Image::kPadding);
  }
  const uint8_t* row(int y) override {
    for (; decoded_ < y; ++decoded_) png_.read_row(buffers_[(decoded_ + 1) % 2].data());
    return buffers_[y % 2].data();
  }

 private:
  PngReader& png_;
  size_t stride_;
  std::vector<uint8_t> buffers_[2];
  int decoded_ = -1;  // the last row decoded
};

}  // namespace

// Decode + the first step of a non-interlaced PNG: the same box and resampling as decoding
// it whole then applying the step, fed row by row.
void Pipeline::decode_png_fused(PngReader& png, Image& dst, Rng& rng) const {
  const ImageSize size = png.size();
  const auto [box, out_h, out_w] = first_crop(size, rng);
  PngRows rows(png, size.width, channels_);
  const ResampleSource src{nullptr, 0, channels_, double(box.left), double(box.top), double(box.left + box.width),
                           double(box.top + box.height), box.left, box.top, box.left + box.width,
                           box.top + box.height, &rows};
  resample(src, out_h, out_w, dst);
}

void Pipeline::run_file(std::span<const uint8_t> file, Rng& rng, uint8_t* out, uint64_t index,
                        const FieldsOut* extra) const {
  if (!python_) return decode_and_run(file, rng, out);
  const Rng key = rng;
  run_python(key, index, [&](uint8_t* made) { decode_and_run(file, rng, made); }, out, extra);
}

void Pipeline::decode_and_run(std::span<const uint8_t> file, Rng& rng, uint8_t* out) const {
  thread_local Image a, b;
  Image *image = &a, *spare = &b;
  if (is_jpeg(file)) {
    const ImageSize size = jpeg_size(file);
    check_image_pixels(size, max_pixels_);
    if (fuse_first_) {
      decode_fused(file, size, *image, rng);
      return run_steps(1, image, spare, rng, out);
    }
    thread_local JpegRegion region;
    decode_jpeg(file, channels_, {0, 0, size.height, size.width}, 1, region);
    std::swap(region.image, *image);
  } else if (is_png(file)) {
    PngReader png(file, channels_);
    check_image_pixels(png.size(), max_pixels_);
    if (fuse_first_ && !png.interlaced()) {
      decode_png_fused(png, *image, rng);
      return run_steps(1, image, spare, rng, out);
    }
    png.read_image(*image);
  } else {
    throw DecodeError("not a JPEG or PNG file (" + hex_prefix(file) + ")");
  }
  run_steps(0, image, spare, rng, out);
}

}  // namespace tandem::data
