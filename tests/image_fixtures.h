// Test helpers: write JPEG and PNG files (libjpeg-turbo's compressor, libpng's simplified
// writer) and make scratch folders, so image fixtures are generated at test time.
#pragma once

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <jpeglib.h>
#include <png.h>
#include <unistd.h>
#include <zlib.h>

#include "tandem/data/codecs/image.h"
#include "tandem/data/core/rng.h"

namespace tandem::data::testing {

// A smooth colour gradient with some texture (noise would make resampling trivial to pass).
inline Image gradient_image(int height, int width, int channels, uint64_t seed) {
  Image img;
  img.reshape(height, width, channels);
  Rng rng(seed);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < channels; ++c) {
        const double v = 40 + 150.0 * x / width * (c + 1) / channels + 60.0 * y / height + 20 * rng.uniform();
        img.row(y)[x * channels + c] = static_cast<uint8_t>(std::min(255.0, v));
      }
  return img;
}

inline std::vector<uint8_t> encode_jpeg(const Image& img, int quality = 92, bool progressive = false) {
  jpeg_compress_struct c{};
  jpeg_error_mgr err{};
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &buf, &size);
  c.image_width = img.width;
  c.image_height = img.height;
  c.input_components = img.channels;
  // 4 channels: CMYK, for which jpeg_set_defaults writes the Adobe marker.
  c.in_color_space = img.channels == 4 ? JCS_CMYK : img.channels == 3 ? JCS_RGB : JCS_GRAYSCALE;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, quality, TRUE);
  if (progressive) jpeg_simple_progression(&c);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(img.row(static_cast<int>(c.next_scanline)));
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  std::vector<uint8_t> out(buf, buf + size);
  jpeg_destroy_compress(&c);
  free(buf);
  return out;
}

// format: PNG_FORMAT_RGB, PNG_FORMAT_GRAY, PNG_FORMAT_RGBA, ... with matching `img` channels.
inline std::vector<uint8_t> encode_png(const Image& img, uint32_t format) {
  png_image p{};
  p.version = PNG_IMAGE_VERSION;
  p.width = img.width;
  p.height = img.height;
  p.format = format;
  png_alloc_size_t size = 0;
  png_image_write_to_memory(&p, nullptr, &size, 0, img.pixels.data(), 0, nullptr);
  std::vector<uint8_t> out(size);
  if (!png_image_write_to_memory(&p, out.data(), &size, 0, img.pixels.data(), 0, nullptr)) out.clear();
  out.resize(size);
  return out;
}

// A PNG whose header declares width x height 8-bit RGB pixels but whose data holds a few
// zero bytes: tiny (under 100 bytes), a decompression bomb to a decoder that allocates from the
// header.
inline std::vector<uint8_t> png_declaring(uint32_t width, uint32_t height) {
  std::vector<uint8_t> out = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  auto chunk = [&out](const char* type, const std::vector<uint8_t>& data) {
    const uint32_t n = static_cast<uint32_t>(data.size());
    for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(n >> s));
    std::vector<uint8_t> body(type, type + 4);
    body.insert(body.end(), data.begin(), data.end());
    out.insert(out.end(), body.begin(), body.end());
    const uint32_t crc = static_cast<uint32_t>(crc32(0, body.data(), static_cast<uInt>(body.size())));
    for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(crc >> s));
  };
  std::vector<uint8_t> ihdr;
  for (uint32_t v : {width, height})
    for (int s = 24; s >= 0; s -= 8) ihdr.push_back(static_cast<uint8_t>(v >> s));
  ihdr.insert(ihdr.end(), {8, 2, 0, 0, 0});  // 8-bit RGB, deflate, no filter method, not interlaced
  chunk("IHDR", ihdr);
  std::vector<uint8_t> zeros(64, 0), deflated(128);
  uLongf size = deflated.size();
  compress(deflated.data(), &size, zeros.data(), zeros.size());
  deflated.resize(size);
  chunk("IDAT", deflated);
  chunk("IEND", {});
  return out;
}

// A small JPEG whose frame header (SOF) is rewritten to declare width x height (at most
// 65535 each): its data ends long before such an image would.
inline std::vector<uint8_t> jpeg_declaring(int width, int height) {
  std::vector<uint8_t> file = encode_jpeg(gradient_image(16, 16, 3, 1));
  for (size_t i = 2; i + 8 < file.size(); ++i) {
    if (file[i] == 0xFF && (file[i + 1] == 0xC0 || file[i + 1] == 0xC2)) {  // SOF0 / SOF2: length, precision, H, W
      file[i + 5] = static_cast<uint8_t>(height >> 8), file[i + 6] = static_cast<uint8_t>(height);
      file[i + 7] = static_cast<uint8_t>(width >> 8), file[i + 8] = static_cast<uint8_t>(width);
      break;
    }
  }
  return file;
}

// Writes a width x height RGB PNG of a simple pattern (stripes and a ramp, so resizing
// it is not trivial) row by row, never holding the whole image: a large valid image that
// compresses small. Interlaced (Adam7) when `interlaced`.
inline void write_pattern_png(const std::filesystem::path& path, int width, int height, bool interlaced = false) {
  std::filesystem::create_directories(path.parent_path());
  FILE* f = std::fopen(path.c_str(), "wb");
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  png_init_io(png, f);
  png_set_compression_level(png, 1);
  png_set_IHDR(png, info, width, height, 8, PNG_COLOR_TYPE_RGB,
               interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  const auto pixel = [&](int y, int x, int c) {
    const int v = c == 0 ? (x / 97 % 2) * 200 + 20 : c == 1 ? (y / 61 % 3) * 100 : (x + y) * 255 / (width + height);
    return static_cast<uint8_t>(v);
  };
  std::vector<uint8_t> row(static_cast<size_t>(width) * 3);
  const int passes = interlaced ? png_set_interlace_handling(png) : 1;
  for (int pass = 0; pass < passes; ++pass) {
    for (int y = 0; y < height; ++y) {
      for (int x = 0; x < width; ++x)
        for (int c = 0; c < 3; ++c) row[static_cast<size_t>(x) * 3 + c] = pixel(y, x, c);
      png_write_row(png, row.data());
    }
  }
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  std::fclose(f);
}

inline void write_bytes(const std::filesystem::path& path, const std::vector<uint8_t>& bytes) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

inline std::vector<uint8_t> read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A fresh directory under the temp dir, removed with the object.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "tandem-test-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace tandem::data::testing
