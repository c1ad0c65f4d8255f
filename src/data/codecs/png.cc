// libpng reports errors through error_fn, which longjmps to png_jmpbuf: as in jpeg.cc, each
// step that can fail is a function with only trivially destructible locals.
#include <png.h>

#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "tandem/data/codecs/png.h"

namespace tandem::data {
namespace {

void read_fn(png_structp png, png_bytep out, size_t n);
void error_fn(png_structp png, png_const_charp message);
void warning_fn(png_structp, png_const_charp) {}  // ancillary-chunk trouble: the pixels are fine

}  // namespace

struct PngReader::State {
  png_structp png = nullptr;
  png_infop info = nullptr;
  const uint8_t* data = nullptr;
  size_t size = 0, pos = 0;
  int rows_read = 0;
  char message[256] = "";
};

namespace {

void read_fn(png_structp png, png_bytep out, size_t n) {
  auto* s = static_cast<PngReader::State*>(png_get_io_ptr(png));
  if (s->size - s->pos < n) png_error(png, "the file ends early (truncated)");
  std::memcpy(out, s->data + s->pos, n);
  s->pos += n;
}

void error_fn(png_structp png, png_const_charp message) {
  auto* s = static_cast<PngReader::State*>(png_get_error_ptr(png));
  std::snprintf(s->message, sizeof s->message, "%s", message);
  png_longjmp(png, 1);
}

// Reads the header and sets up the conversion to 8-bit gray or RGB without alpha.
bool read_info(PngReader::State& s, int channels) {
  if (setjmp(png_jmpbuf(s.png))) return false;
  png_set_read_fn(s.png, &s, read_fn);
  png_read_info(s.png, s.info);
  const int color = png_get_color_type(s.png, s.info);
  png_set_expand(s.png);
  png_set_strip_16(s.png);
  png_set_strip_alpha(s.png);
  if (channels == 3 && !(color & PNG_COLOR_MASK_COLOR)) png_set_gray_to_rgb(s.png);
  if (channels == 1 && (color & PNG_COLOR_MASK_COLOR)) png_set_rgb_to_gray_fixed(s.png, 1, 29900, 58700);
  png_set_interlace_handling(s.png);
  png_read_update_info(s.png, s.info);
  return true;
}

bool read_pixels(PngReader::State& s, png_bytepp rows) {
  if (setjmp(png_jmpbuf(s.png))) return false;
  png_read_image(s.png, rows);
  return true;
}

bool read_one_row(PngReader::State& s, png_bytep row) {
  if (setjmp(png_jmpbuf(s.png))) return false;
  png_read_row(s.png, row, nullptr);
  return true;
}

[[noreturn]] void corrupt(const PngReader::State& s) { throw DecodeError(std::string("corrupt PNG: ") + s.message); }

}  // namespace

bool is_png(std::span<const uint8_t> file) {
  static const uint8_t signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  return file.size() >= 8 && std::memcmp(file.data(), signature, 8) == 0;
}

PngReader::PngReader(std::span<const uint8_t> file, int channels) : s_(std::make_unique<State>()) {
  State& s = *s_;
  s.data = file.data();
  s.size = file.size();
  s.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &s, error_fn, warning_fn);
  if (!s.png) throw DecodeError("libpng could not start (out of memory?)");
  s.info = png_create_info_struct(s.png);
  if (!s.info || !read_info(s, channels)) {
    const std::string message = std::string("corrupt PNG: ") + s.message;
    png_destroy_read_struct(&s.png, &s.info, nullptr);  // the destructor does not run
    throw DecodeError(message);
  }
  const int got = png_get_channels(s.png, s.info);
  if (got != channels) {
    png_destroy_read_struct(&s.png, &s.info, nullptr);
    throw DecodeError("PNG converts to " + std::to_string(got) + " channels, not " + std::to_string(channels));
  }
}

PngReader::~PngReader() { png_destroy_read_struct(&s_->png, &s_->info, nullptr); }

ImageSize PngReader::size() const {
  return {static_cast<int>(png_get_image_height(s_->png, s_->info)),
          static_cast<int>(png_get_image_width(s_->png, s_->info))};
}

bool PngReader::interlaced() const { return png_get_interlace_type(s_->png, s_->info) != PNG_INTERLACE_NONE; }

void PngReader::read_image(Image& out) {
  const ImageSize size = this->size();
  out.reshape(size.height, size.width, static_cast<int>(png_get_channels(s_->png, s_->info)));
  thread_local std::vector<png_bytep> rows;
  rows.resize(out.height);
  for (int y = 0; y < out.height; ++y) rows[y] = out.row(y);
  if (!read_pixels(*s_, rows.data())) corrupt(*s_);
  s_->rows_read = out.height;
}

void PngReader::read_row(uint8_t* row) {
  if (s_->rows_read >= size().height) throw std::logic_error("PngReader::read_row past the last row");
  if (!read_one_row(*s_, row)) corrupt(*s_);
  ++s_->rows_read;
}

void decode_png(std::span<const uint8_t> file, int channels, Image& out) {
  PngReader reader(file, channels);
  reader.read_image(out);
}

}  // namespace tandem::data
