// libjpeg reports errors by calling error_exit, which must not return: it longjmps back to
// the setjmp of the step that was running. Each step is a function whose locals are all
// trivially destructible, so the jump skips no destructor; C++ work (allocation, throwing)
// happens between the steps.
#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdio>  // before jpeglib.h, which uses FILE
#include <stdexcept>
#include <string>

#include <jpeglib.h>
#include <jerror.h>

#include "tandem/data/codecs/jpeg.h"

namespace tandem::data {
namespace {

constexpr int kMargin = 2;  // pixels decoded around a crop, for exact chroma upsampling at its edges

struct ErrorManager {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void on_error(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// Warnings mean corrupt or truncated data (libjpeg then fills in grey): an error here.
// Stray bytes between markers are harmless and common, so they pass.
void on_message(j_common_ptr cinfo, int level) {
  if (level >= 0 || cinfo->err->msg_code == JWRN_EXTRANEOUS_DATA) return;
  on_error(cinfo);
}

// jpeg_CreateDecompress compares the JPEG_LIB_VERSION and struct size this file was
// compiled with against the library's, and fails (through error_exit) when they differ.
bool create(jpeg_decompress_struct& cinfo, ErrorManager& err, int version, size_t struct_size) {
  if (setjmp(err.jump)) return false;
  jpeg_CreateDecompress(&cinfo, version, struct_size);
  return true;
}

// One decompressor per thread, reused: creating one allocates.
struct Decoder {
  jpeg_decompress_struct cinfo{};
  ErrorManager err{};
  explicit Decoder(int version = JPEG_LIB_VERSION, size_t struct_size = sizeof(jpeg_decompress_struct)) {
    cinfo.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = on_error;
    err.pub.emit_message = on_message;
    if (!create(cinfo, err, version, struct_size)) {
      throw std::runtime_error(std::string("libjpeg refuses to start a decoder: ") + err.message +
                               ": tandem was compiled against the headers (jpeglib.h, jconfig.h) of another "
                               "libjpeg than the one it loaded; rebuild it with the headers of the library it "
                               "runs with (docs/gpu.md, 'Building')");
    }
  }
  ~Decoder() { jpeg_destroy_decompress(&cinfo); }
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;
};

Decoder& decoder() {
  thread_local Decoder d;
  return d;
}

bool read_header(Decoder& d, const uint8_t* data, size_t size) {
  if (setjmp(d.err.jump)) return false;
  jpeg_mem_src(&d.cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&d.cinfo, TRUE);
  return true;
}

bool is_cmyk(const jpeg_decompress_struct& c) {
  return c.jpeg_color_space == JCS_CMYK || c.jpeg_color_space == JCS_YCCK;
}

// Starts decompression and narrows it to columns [*x0, *x0 + *width) and rows from `top`.
bool start(Decoder& d, int channels, int scale_denom, JDIMENSION* x0, JDIMENSION* width, int top) {
  if (setjmp(d.err.jump)) return false;
  jpeg_decompress_struct& c = d.cinfo;
  c.out_color_space = is_cmyk(c) ? JCS_CMYK : (channels == 1 ? JCS_GRAYSCALE : JCS_RGB);
  c.scale_num = 1;
  c.scale_denom = static_cast<unsigned>(scale_denom);
  jpeg_start_decompress(&c);
  if (*width < c.output_width) jpeg_crop_scanline(&c, x0, width);
  if (top > 0) jpeg_skip_scanlines(&c, static_cast<JDIMENSION>(top));
  return true;
}

bool read_rows(Decoder& d, uint8_t* out, size_t stride, int rows) {
  if (setjmp(d.err.jump)) return false;
  JSAMPROW pointers[16];
  for (int done = 0; done < rows;) {
    const int n = std::min(rows - done, 16);
    for (int i = 0; i < n; ++i) pointers[i] = out + (done + i) * stride;
    done += static_cast<int>(jpeg_read_scanlines(&d.cinfo, pointers, static_cast<JDIMENSION>(n)));
  }
  return true;
}

[[noreturn]] void fail(Decoder& d, const char* stage) {
  jpeg_abort_decompress(&d.cinfo);
  throw DecodeError(std::string("corrupt JPEG (") + stage + "): " + d.err.message);
}

inline uint8_t mul255(int a, int b) {
  const int t = a * b + 128;
  return static_cast<uint8_t>((t + (t >> 8)) >> 8);
}

// CMYK rows -> RGB or gray in place, as PIL converts (Adobe files store inverted CMYK).
void convert_cmyk(Image& image, bool adobe, int channels) {
  const size_t n = static_cast<size_t>(image.height) * image.width;
  uint8_t* p = image.pixels.data();
  for (size_t i = 0; i < n; ++i) {
    int v[4];
    for (int c = 0; c < 4; ++c) v[c] = adobe ? p[i * 4 + c] : 255 - p[i * 4 + c];
    const uint8_t r = mul255(v[0], v[3]), g = mul255(v[1], v[3]), b = mul255(v[2], v[3]);
    if (channels == 3) {
      p[i * 3] = r, p[i * 3 + 1] = g, p[i * 3 + 2] = b;
    } else {
      p[i] = static_cast<uint8_t>((r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16);
    }
  }
  image.channels = channels;
}

}  // namespace

void check_jpeg_library(int version, size_t struct_size) { Decoder probe(version, struct_size); }

bool is_jpeg(std::span<const uint8_t> file) {
  return file.size() >= 3 && file[0] == 0xFF && file[1] == 0xD8 && file[2] == 0xFF;
}

ImageSize jpeg_size(std::span<const uint8_t> file) {
  Decoder& d = decoder();
  if (!read_header(d, file.data(), file.size())) fail(d, "header");
  const ImageSize size{static_cast<int>(d.cinfo.image_height), static_cast<int>(d.cinfo.image_width)};
  jpeg_abort_decompress(&d.cinfo);
  return size;
}

void decode_jpeg(std::span<const uint8_t> file, int channels, const CropBox& box, int scale_denom, JpegRegion& out) {
  Decoder& d = decoder();
  if (!read_header(d, file.data(), file.size())) fail(d, "header");
  const int w = static_cast<int>(d.cinfo.image_width), h = static_cast<int>(d.cinfo.image_height);
  out.scaled_width = jpeg_scaled(w, scale_denom);
  out.scaled_height = jpeg_scaled(h, scale_denom);
  // The box in scaled pixels, widened to whole pixels and by a margin: chroma upsampling
  // blends neighbouring chroma samples, which a cropped decode lacks at its edges.
  const double sx = static_cast<double>(out.scaled_width) / w, sy = static_cast<double>(out.scaled_height) / h;
  const int x0 = std::clamp(static_cast<int>(box.left * sx) - kMargin, 0, out.scaled_width - 1);
  const int x1 = std::clamp(static_cast<int>(std::ceil((box.left + box.width) * sx)) + kMargin, x0 + 1, out.scaled_width);
  const int y0 = std::clamp(static_cast<int>(box.top * sy) - kMargin, 0, out.scaled_height - 1);
  const int y1 = std::clamp(static_cast<int>(std::ceil((box.top + box.height) * sy)) + kMargin, y0 + 1, out.scaled_height);
  JDIMENSION left = static_cast<JDIMENSION>(x0), width = static_cast<JDIMENSION>(x1 - x0);
  if (!start(d, channels, scale_denom, &left, &width, y0)) fail(d, "start");
  const bool cmyk = d.cinfo.out_color_space == JCS_CMYK;
  out.top = y0;
  out.left = static_cast<int>(left);
  out.image.reshape(y1 - y0, static_cast<int>(width), cmyk ? 4 : channels);
  if (!read_rows(d, out.image.pixels.data(), out.image.stride(), y1 - y0)) fail(d, "data");
  jpeg_abort_decompress(&d.cinfo);  // the rows below the crop are not needed
  if (cmyk) convert_cmyk(out.image, d.cinfo.saw_Adobe_marker, channels);
}

}  // namespace tandem::data
