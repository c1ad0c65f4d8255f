// Test helpers: write JPEG and PNG files (libjpeg-turbo's compressor, libpng's simplified
// writer) and make scratch folders, so image fixtures are generated at test time.
#pragma once

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <jpeglib.h>
#include <png.h>
#include <unistd.h>

#include "tandem/data/codecs/image.h"
#include "tandem/data/augment/rng.h"

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

inline void write_bytes(const std::filesystem::path& path, const std::vector<uint8_t>& bytes) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
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
