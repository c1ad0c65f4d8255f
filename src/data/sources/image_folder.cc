#include "tandem/data/sources/image_folder.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <tuple>

#include <spdlog/spdlog.h>

#include "tandem/common/error.h"
#include "tandem/common/text.h"
#include "tandem/data/sources/bad_samples.h"
#include "tandem/data/sources/file_dataset.h"
#include "tandem/data/codecs/pixel_limit.h"
#include "tandem/data/augment/pipeline.h"
#include "tandem/data/augment/rng.h"
#include "tandem/data/python/process_pool.h"

namespace tandem::data {
namespace fs = std::filesystem;
namespace {

bool is_image_name(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

bool hidden(const fs::path& p) { return !p.filename().empty() && p.filename().string()[0] == '.'; }

std::vector<std::string> class_folders(const fs::path& root) {
  std::vector<std::string> classes;
  for (const fs::directory_entry& e : fs::directory_iterator(root, fs::directory_options::follow_directory_symlink)) {
    if (e.is_directory() && !hidden(e.path())) classes.push_back(e.path().filename().string());
  }
  std::sort(classes.begin(), classes.end());
  return classes;
}

// One class's image files, in torchvision's order: sorted(os.walk) then sorted(files),
// that is by (folder, file name).
void index_class(const fs::path& root, const std::string& name, int label, FolderIndex& index) {
  std::vector<std::tuple<std::string, std::string, uint64_t>> found;  // folder, name, bytes
  const auto options = fs::directory_options::follow_directory_symlink;
  for (auto it = fs::recursive_directory_iterator(root / name, options); it != fs::recursive_directory_iterator(); ++it) {
    if (hidden(it->path())) {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file()) continue;
    const fs::path rel = it->path().lexically_relative(root);
    if (!is_image_name(rel)) {
      if (index.ignored++ == 0) index.ignored_example = rel.string();
      continue;
    }
    found.emplace_back(rel.parent_path().string(), rel.filename().string(), it->file_size());
  }
  std::sort(found.begin(), found.end());
  if (found.empty()) index.empty_classes.push_back(name);
  for (const auto& [folder, file, bytes] : found) index.files.push_back({folder + "/" + file, bytes, label});
}

// The first symbolic link on `path` that leads back to itself (ELOOP) or to a folder that
// contains it, or "" when there is none.
std::string loop_link(const fs::path& path) {
  fs::path prefix;
  for (const fs::path& part : path) {
    prefix /= part;
    std::error_code ec;
    if (!fs::is_symlink(prefix, ec)) continue;
    const fs::path target = fs::canonical(prefix, ec);
    if (ec) return ec == std::errc::too_many_symbolic_link_levels ? prefix.string() : "";
    const fs::path parent = fs::canonical(prefix.parent_path(), ec);
    if (ec) return "";
    const auto [t, p] = std::mismatch(target.begin(), target.end(), parent.begin(), parent.end());
    if (t == target.end()) return prefix.string();  // the link's target holds the link
  }
  return "";
}

// What index_folder says when listing fails: a link loop as such, anything else (EACCES,
// EIO, ...) with the system's words.
std::string listing_problem(const fs::filesystem_error& e) {
  const std::string link = loop_link(e.path1());
  if (!link.empty() || e.code() == std::errc::too_many_symbolic_link_levels) {
    return "a symbolic link loop at " + (link.empty() ? e.path1().string() : link) +
           " (ELOOP: it leads back to itself or to a folder that holds it): remove the link or point it elsewhere";
  }
  return "cannot list " + e.path1().string() + ": " + e.code().message() + ": check its permissions";
}

// Reads a whole file into `out`. Returns an empty string, or the problem.
std::string read_whole(const std::string& path, uint64_t expected, std::vector<uint8_t>& out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::string("cannot open: ") + std::strerror(errno);
  struct stat st{};
  std::string problem;
  if (::fstat(fd, &st) != 0) problem = std::string("cannot stat: ") + std::strerror(errno);
  else if (static_cast<uint64_t>(st.st_size) != expected)
    problem = "changed since it was indexed (" + std::to_string(expected) + " bytes then, " +
              std::to_string(st.st_size) + " now)";
  out.resize(static_cast<size_t>(st.st_size));
  for (size_t done = 0; problem.empty() && done < out.size();) {
    const ssize_t n = ::read(fd, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) problem = n == 0 ? "shorter than its size" : std::string("read failed: ") + std::strerror(errno);
    else done += static_cast<size_t>(n);
  }
  ::close(fd);
  return problem;
}

std::string default_pipeline(const DataOptions& opts) {
  const int s = opts.image_size ? opts.image_size : 224;
  if (opts.split == "test") {
    const int resize = static_cast<int>(std::lround(s * 256.0 / 224.0));
    return "decode,resize(" + std::to_string(resize) + "),center_crop(" + std::to_string(s) + ")";
  }
  return "decode,random_resized_crop(" + std::to_string(s) + "),hflip";
}

}  // namespace

std::string image_folder_pipeline(const DataOptions& opts) {
  return parse_pipeline(opts.pipeline.empty() ? default_pipeline(opts) : opts.pipeline).canonical();
}

FolderIndex index_folder(const std::string& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    throw ConfigError("--data imagefolder:" + printable(root, 200) + ": not a directory: point it at a folder with one subfolder per class");
  }
  FolderIndex index;
  try {
    index.classes = class_folders(root);
    for (size_t c = 0; c < index.classes.size(); ++c) index_class(root, index.classes[c], static_cast<int>(c), index);
  } catch (const fs::filesystem_error& e) {
    throw ConfigError(listing_problem(e));
  }
  if (index.classes.empty()) {
    throw ConfigError(root + " has no class folders: put images in " + root + "/<class>/<image>.jpg|.png");
  }
  return index;
}

namespace {

class ImageFolderDataset final : public Dataset {
 public:
  ImageFolderDataset(const DataOptions& opts, const std::string& root)
      : root_(root),
        seed_(opts.seed),
        max_pixels_(opts.max_image_pixels),
        shm_bytes_(opts.python_shm_bytes),
        policy_(parse_bad_sample_policy(opts.on_bad_sample)),
        index_(index_folder(root)),
        spec_(parse_pipeline(opts.pipeline.empty() ? default_pipeline(opts) : opts.pipeline)),
        pipeline_(spec_, {true, 3, 0, 0, opts.max_image_pixels, &opts}) {
    report_index_problems();
    info_.name = "imagefolder";
    info_.size = samples_per_epoch(opts, index_.files.size(), root);
    learn_python_output();
    info_.sample_shape = pipeline_.sample_shape();
    info_.dtype = DType::kUInt8;
    info_.add_fields(pipeline_.extra_fields());
    info_.num_classes = static_cast<int>(index_.classes.size());
    info_.class_names = index_.classes;
    set_normalisation();
    info_.description = description();
    info_.fingerprint = fingerprint_of(info_.description);
    spdlog::info("imagefolder {}: {} images in {} classes, {} samples per epoch, pipeline {}", root, index_.files.size(),
                 index_.classes.size(), info_.size, spec_.canonical());
  }

  const DatasetInfo& info() const override { return info_; }
  std::vector<std::string> skipped() const override { return skips_.entries(); }
  uint64_t skipped_count() const override { return skips_.count(); }
  uint64_t shared_memory_bytes() const override { return pipeline_.has_python_step() ? shm_bytes_ : 0; }

  int64_t produce(uint64_t index, uint32_t epoch, std::span<std::byte> out) const override {
    return produce_into(index, epoch, out, nullptr);
  }

  int64_t produce_fields(uint64_t index, uint32_t epoch, std::span<std::byte> out,
                         const FieldsOut& extra) const override {
    return produce_into(index, epoch, out, &extra);
  }

 private:
  // produce_fields(), or produce() when `extra` is null.
  int64_t produce_into(uint64_t index, uint32_t epoch, std::span<std::byte> out, const FieldsOut* extra) const {
    check_sample_index(index, info_);
    uint64_t item = item_of(index, info_.size, index_.files.size());
    for (uint64_t tries = 0;; ++tries) {
      const ImageFile& file = index_.files[item];
      std::string problem;
      try {
        problem = try_produce(file, index, epoch, out, extra);
      } catch (const PythonSampleError& e) {  // the python() step: the user's code, not the file
        if (policy_ == BadSamplePolicy::kFail) {
          throw DataError(std::string(e.what()) + " (image " + root_ + "/" + file.path +
                          ")\n(fix the function, or pass --on-bad-sample skip to use the next image instead)");
        }
        problem = e.what();
      }
      if (problem.empty()) return file.label;
      const std::string path = root_ + "/" + file.path;
      if (policy_ == BadSamplePolicy::kFail) {
        throw DataError(path + ": " + problem + ": remove or replace the file, or pass --on-bad-sample skip");
      }
      skips_.record(path, problem);
      if (tries + 1 >= std::min<uint64_t>(kMaxSubstituteTries, index_.files.size())) {
        throw DataError("no usable image among the " + std::to_string(tries + 1) + " files from " + path +
                          " on: check the data under " + root_);
      }
      item = (item + 1) % index_.files.size();  // the substitute: the next file, same random key
    }
  }

  // Makes the sample from `file`; returns "" or what was wrong with the file.
  std::string try_produce(const ImageFile& file, uint64_t index, uint32_t epoch, std::span<std::byte> out,
                          const FieldsOut* extra) const {
    thread_local std::vector<uint8_t> bytes;
    std::string problem = read_whole(root_ + "/" + file.path, file.bytes, bytes);
    if (!problem.empty()) return problem;
    Rng rng(kAugmentStream, seed_, epoch, index);
    try {
      pipeline_.run_file(bytes, rng, reinterpret_cast<uint8_t*>(out.data()), index, extra);
    } catch (const ImageTooLarge& e) {
      return e.what();
    } catch (const DecodeError& e) {
      return std::string("not a decodable image: ") + e.what();
    }
    return "";
  }

  // A python() step's output shape: what it returns for sample 0 of epoch 0.
  void learn_python_output() {
    pipeline_.learn_output([&](uint8_t* out) {
      const ImageFile& file = index_.files[item_of(0, info_.size, index_.files.size())];
      std::vector<uint8_t> bytes;
      const std::string problem = read_whole(root_ + "/" + file.path, file.bytes, bytes);
      if (!problem.empty()) throw DataError(root_ + "/" + file.path + ": " + problem);
      Rng rng(kAugmentStream, seed_, 0, 0);
      pipeline_.run_file(bytes, rng, out, 0);
    });
  }

  void report_index_problems() {
    if (index_.ignored > 0) {
      spdlog::warn("imagefolder {}: ignoring {} files that are not .jpg/.jpeg/.png, e.g. {}", root_, index_.ignored,
                   index_.ignored_example);
    }
    for (const std::string& name : index_.empty_classes) {
      const std::string path = root_ + "/" + name;
      if (policy_ == BadSamplePolicy::kFail) {
        throw ConfigError(path + " is an empty class folder (no .jpg/.jpeg/.png files): add images or remove it " +
                          "(or pass --on-bad-sample skip to keep it as a class without samples)");
      }
      skips_.note(path, "empty class folder (kept as class " + name + ", without samples)");
    }
  }

  void set_normalisation() {
    if (!pipeline_.mean().empty()) {
      info_.mean = pipeline_.mean();
      info_.std = pipeline_.stddev();
    } else if (pipeline_.channels() == 3) {
      info_.mean = {0.485f, 0.456f, 0.406f};  // ImageNet's
      info_.std = {0.229f, 0.224f, 0.225f};
    } else {
      info_.mean = {0.449f};  // ImageNet's, averaged over channels
      info_.std = {0.226f};
    }
  }

  // What the fingerprint hashes: the file list as one hash, and the settings.
  std::string description() const {
    uint64_t files = kFnvOffset;
    for (const std::string& c : index_.classes) files = fnv1a(c + '\n', files);
    for (const ImageFile& f : index_.files) files = fnv1a(f.path + '\0' + std::to_string(f.bytes) + '\n', files);
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(files));
    return "imagefolder/v1 files=" + std::string(hex) + " n=" + std::to_string(index_.files.size()) +
           " size=" + std::to_string(info_.size) + " seed=" + std::to_string(seed_) + " pipeline=" + spec_.canonical() +
           " max_pixels=" + std::to_string(max_pixels_);
  }

  std::string root_;
  uint64_t seed_;
  uint64_t max_pixels_;  // under skip, which files are substituted
  uint64_t shm_bytes_;   // DataOptions::python_shm_bytes
  BadSamplePolicy policy_;
  FolderIndex index_;
  PipelineSpec spec_;
  Pipeline pipeline_;
  DatasetInfo info_;
  mutable SkipLog skips_;
};

}  // namespace

std::shared_ptr<const Dataset> make_image_folder(const DataOptions& opts, const std::string& root) {
  return std::make_shared<ImageFolderDataset>(opts, root);
}

}  // namespace tandem::data
