// PNG decoding with libpng, to 8-bit gray or RGB as torchvision's decode_png (and PIL's
// convert) give it: palettes and low bit depths expanded, 16-bit reduced to 8, alpha dropped.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "tandem/data/codecs/image.h"
#include "tandem/data/codecs/jpeg.h"  // DecodeError, ImageSize

namespace tandem::data {

bool is_png(std::span<const uint8_t> file);

// One PNG being read: its header when constructed (nothing of the image is allocated
// yet, so the size can be checked first), then its rows top to bottom, one at a time or
// all at once. Not thread-safe; `file` must outlive it.
class PngReader {
 public:
  // Reads the header and sets up the conversion to 1 (gray) or 3 (RGB) channels. Throws
  // DecodeError for a corrupt header.
  PngReader(std::span<const uint8_t> file, int channels);
  ~PngReader();
  PngReader(const PngReader&) = delete;
  PngReader& operator=(const PngReader&) = delete;

  ImageSize size() const;
  // Adam7-interlaced files deliver their rows only once the last pass is read: they can
  // only be decoded whole (read_image).
  bool interlaced() const;

  // Decodes the whole image into `out`. REQUIRES: no row read yet. Throws DecodeError.
  void read_image(Image& out);
  // Decodes the next row into `row` (width x channels bytes). REQUIRES: not interlaced,
  // fewer than size().height rows read. Throws DecodeError.
  void read_row(uint8_t* row);

  struct State;  // libpng's structures and the read position; png.cc's own

 private:
  std::unique_ptr<State> s_;
};

// Decodes the whole image as 1 (gray) or 3 (RGB) channels into `out`. Throws DecodeError
// for corrupt or truncated data.
void decode_png(std::span<const uint8_t> file, int channels, Image& out);

}  // namespace tandem::data
