#include "tandem/data/sources/image_folder.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <tuple>

#include <spdlog/spdlog.h>

#include "tandem/common/error.h"
#include "tandem/common/hash.h"
#include "tandem/common/text.h"
#include "tandem/data/augment/pipeline_spec.h"
#include "tandem/data/sources/bad_samples.h"
#include "tandem/data/sources/stored_images.h"

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

}  // namespace

std::string image_folder_pipeline(const ImageOptions& opts) {
  return parse_pipeline(opts.pipeline.empty() ? default_image_pipeline(opts) : opts.pipeline).canonical();
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

// What a listing found that is not a sample: files of other types (a warning), empty class
// folders (an error, or under --on-bad-sample skip a skipped() entry).
void report_index_problems(const ImageOptions& opts, const std::string& root, const FolderIndex& index,
                           StoredIndex& stored) {
  if (index.ignored > 0) {
    spdlog::warn("imagefolder {}: ignoring {} files that are not .jpg/.jpeg/.png, e.g. {}", root, index.ignored,
                 index.ignored_example);
  }
  for (const std::string& name : index.empty_classes) {
    const std::string path = root + "/" + name;
    if (parse_bad_sample_policy(opts.on_bad_sample) == BadSamplePolicy::kFail) {
      throw ConfigError(path + " is an empty class folder (no .jpg/.jpeg/.png files): add images or remove it " +
                        "(or pass --on-bad-sample skip to keep it as a class without samples)");
    }
    stored.skipped.emplace_back(path, "empty class folder (kept as class " + name + ", without samples)");
  }
}

// The folder's files as stored items; the description hashes the class and file lists.
StoredIndex stored_index(const std::string& root, const FolderIndex& index) {
  StoredIndex out;
  out.name = "imagefolder";
  out.root = root;
  out.num_classes = static_cast<int>(index.classes.size());
  out.class_names = index.classes;
  uint64_t files = kFnvOffset;
  for (const std::string& c : index.classes) files = fnv1a(c + '\n', files);
  for (const ImageFile& f : index.files) {
    files = fnv1a(f.path + '\0' + std::to_string(f.bytes) + '\n', files);
    out.items.push_back({static_cast<uint32_t>(out.files.size()), 0, f.bytes, f.label, ""});
    out.files.push_back(f.path);
  }
  out.description = "imagefolder/v1 files=" + hex64(files) + " n=" + std::to_string(index.files.size());
  return out;
}

}  // namespace

std::shared_ptr<const Dataset> make_image_folder(const ImageOptions& opts, const std::string& root) {
  const FolderIndex index = index_folder(root);
  StoredIndex stored = stored_index(root, index);
  report_index_problems(opts, root, index, stored);
  auto dataset = make_stored_images(opts, std::move(stored));
  spdlog::info("imagefolder {}: {} images in {} classes, {} samples per epoch", root, index.files.size(),
               index.classes.size(), dataset->info().size);
  return dataset;
}

}  // namespace tandem::data
