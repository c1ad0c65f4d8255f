#include "tandem/data/sources/webdataset.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <chrono>
#include <filesystem>
#include <optional>
#include <thread>
#include <unordered_map>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "tandem/common/error.h"
#include "tandem/common/files.h"
#include "tandem/common/hash.h"
#include "tandem/common/text.h"
#include "tandem/data/io/read_ahead.h"
#include "tandem/data/sources/bad_samples.h"
#include "tandem/data/sources/tar.h"

namespace tandem::data {
namespace fs = std::filesystem;
namespace {

// "a..b" of a brace: the numbers from a to b, as wide as a is written.
std::optional<std::vector<std::string>> numeric_range(const std::string& body) {
  const size_t dots = body.find("..");
  if (dots == std::string::npos) return std::nullopt;
  const std::string a = body.substr(0, dots), b = body.substr(dots + 2);
  uint64_t lo = 0, hi = 0;
  const auto whole = [](const std::string& t, uint64_t& v) {
    return !t.empty() && std::from_chars(t.data(), t.data() + t.size(), v).ptr == t.data() + t.size();
  };
  if (!whole(a, lo) || !whole(b, hi)) return std::nullopt;
  if (hi < lo) {
    throw ConfigError("the brace {" + printable(body, 60) + "} runs backwards: write the smaller number first, {" + b +
                      ".." + a + "}");
  }
  if (hi - lo >= 10000000) return std::nullopt;
  std::vector<std::string> out;
  for (uint64_t v = lo; v <= hi; ++v) {
    std::string digits = std::to_string(v);
    if (digits.size() < a.size()) digits.insert(0, a.size() - digits.size(), '0');
    out.push_back(digits);
  }
  return out;
}

std::vector<std::string> alternatives(const std::string& body, const std::string& pattern) {
  if (body.find("..") != std::string::npos) {
    if (auto range = numeric_range(body)) return *range;
    throw ConfigError("the brace {" + printable(body, 60) + "} in " + printable(pattern, 200) +
                      " is no range of whole numbers: write it like {000000..001023}");
  }
  std::vector<std::string> out;
  for (size_t start = 0;;) {
    const size_t comma = body.find(',', start);
    out.push_back(body.substr(start, comma - start));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

std::string index_file_of(const std::string& root, const std::string& pattern_name) {
  return root + "/" + (pattern_name.empty() ? std::string("tandem-index.txt") : pattern_name + ".tandem-index.txt");
}

void add_sizes(ShardSet& set) {
  for (const std::string& name : set.names) {
    std::error_code ec;
    const uint64_t size = fs::file_size(fs::path(set.root) / name, ec);
    if (ec) {
      throw ConfigError("shard " + printable(set.root + "/" + name, 300) + " cannot be read (" + ec.message() +
                        "): check the path and its permissions");
    }
    set.sizes.push_back(size);
  }
}

}  // namespace

std::vector<std::string> expand_braces(const std::string& pattern) {
  const size_t open = pattern.find('{');
  if (open == std::string::npos) return {pattern};
  const size_t close = pattern.find('}', open);
  if (close == std::string::npos) {
    throw ConfigError("an unclosed brace in " + printable(pattern, 200) + ": write it like train-{000000..001023}.tar");
  }
  const std::vector<std::string> tails = expand_braces(pattern.substr(close + 1));
  std::vector<std::string> out;
  for (const std::string& choice : alternatives(pattern.substr(open + 1, close - open - 1), pattern)) {
    for (const std::string& tail : tails) out.push_back(pattern.substr(0, open) + choice + tail);
  }
  return out;
}

ShardSet find_shards(const std::string& path) {
  ShardSet set;
  std::error_code ec;
  if (path.find('{') == std::string::npos) {
    if (!fs::is_directory(path, ec)) {
      throw ConfigError("--data webdataset:" + printable(path, 200) +
                        " is not a folder: name a folder of .tar shards or a pattern like train-{000000..001023}.tar");
    }
    set.root = path;
    while (set.root.size() > 1 && set.root.back() == '/') set.root.pop_back();  // "dir/" names shards dir/x.tar
    for (const fs::directory_entry& e : fs::directory_iterator(path, ec)) {
      const std::string name = e.path().filename().string();
      if (name[0] != '.' && e.path().extension() == ".tar" && e.is_regular_file()) set.names.push_back(name);
    }
    if (set.names.empty()) throw ConfigError(printable(path, 200) + " holds no .tar shards: put the shards there");
    set.index_file = index_file_of(set.root, "");
  } else {
    const fs::path pattern(path);
    if (pattern.parent_path().string().find('{') != std::string::npos) {
      throw ConfigError("--data webdataset:" + printable(path, 200) +
                        ": braces only in the file name, with every shard in one folder");
    }
    set.root = pattern.parent_path().empty() ? "." : pattern.parent_path().string();
    set.names = expand_braces(pattern.filename().string());
    size_t missing = 0;
    std::string first;
    for (const std::string& n : set.names) {
      if (!fs::exists(fs::path(set.root) / n, ec) && missing++ == 0) first = n;
    }
    if (missing) {
      throw ConfigError(std::to_string(missing) + " of the " + std::to_string(set.names.size()) + " shards of " +
                        printable(path, 200) + " do not exist, e.g. " + printable(set.root + "/" + first, 300) +
                        ": fix the pattern's range");
    }
    set.index_file = index_file_of(set.root, pattern.filename().string());
  }
  std::sort(set.names.begin(), set.names.end());
  set.names.erase(std::unique(set.names.begin(), set.names.end()), set.names.end());
  add_sizes(set);
  return set;
}

namespace {

bool is_image_ext(const std::string& ext) { return ext == "jpg" || ext == "jpeg" || ext == "png"; }
bool is_label_ext(const std::string& ext) { return ext == "cls" || ext == "json"; }
// Images of a kind tandem does not decode: a shard of them would otherwise give no samples.
bool is_other_image_ext(const std::string& ext) {
  return ext == "webp" || ext == "tif" || ext == "tiff" || ext == "bmp" || ext == "gif" || ext == "ppm" ||
         ext == "jxl" || ext == "avif" || ext == "heic";
}

// What is wrong with a member whose extension `ext` tandem does not use, when it looks like
// part of a sample: an image or label behind a second dot (the key ends at the first), or
// an image format tandem does not read. Empty for other files (captions, metadata).
std::string unused_member_problem(const std::string& key, const std::string& ext) {
  const std::string last = ext.substr(ext.rfind('.') + 1);
  if (last != ext && (is_image_ext(last) || is_label_ext(last))) {
    return "its key is '" + key + "' (a key ends at the first dot of the file name), so its extension '" + ext +
           "' is neither an image nor a label: rename the members without dots in the key (e.g. " + key + "_" +
           ext.substr(0, ext.rfind('.')) + "." + last + ")";
  }
  if (is_other_image_ext(last)) {
    return "a ." + last + " image: tandem decodes .jpg, .jpeg and .png; convert the images";
  }
  return "";
}

// "dir/n0144_10026.JPEG" -> {"dir/n0144_10026", "jpeg"}: the key is the path up to the
// first dot of the file name; the extension what follows, lower-cased.
std::pair<std::string, std::string> key_and_ext(const std::string& name) {
  const size_t slash = name.rfind('/');
  const size_t dot = name.find('.', slash == std::string::npos ? 0 : slash + 1);
  if (dot == std::string::npos) return {name, ""};
  std::string ext = name.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return {name.substr(0, dot), ext};
}

// A label member's class: .cls, a decimal number; .json, an object with an integer "label".
// Returns the label, or -1 with `problem` set.
int parse_label(const std::string& ext, const std::string& data, std::string& problem) {
  if (ext == "cls") {
    const size_t a = data.find_first_not_of(" \t\r\n"), b = data.find_last_not_of(" \t\r\n");
    const std::string text = a == std::string::npos ? "" : data.substr(a, b - a + 1);
    int v = -1;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < 0 || v > kMaxLabel) {
      problem = "label '" + printable(text, 40) + "' is not a class number (a whole number from 0 to " +
                std::to_string(kMaxLabel) + ")";
      return -1;
    }
    return v;
  }
  const nlohmann::json j = nlohmann::json::parse(data, nullptr, false);
  if (!j.is_object() || !j.contains("label") || !j["label"].is_number_integer() || j["label"].get<int64_t>() < 0 ||
      j["label"].get<int64_t>() > kMaxLabel) {
    problem = "no \"label\" field holding a class number (a whole number from 0 to " + std::to_string(kMaxLabel) +
              ") in its JSON";
    return -1;
  }
  return j["label"].get<int>();
}

// The members of one key, met one after the other in a shard.
struct Group {
  std::string key;
  const TarMember* image = nullptr;
  const TarMember* label = nullptr;  // .cls, else .json
  std::string label_ext;
  std::string problem;               // with the member it concerns, when there is one
  bool sample_like = false;          // a member that was meant as part of a sample but cannot be
};

void add_member(Group& g, const TarMember& m, const std::string& ext) {
  const bool used = is_image_ext(ext) || is_label_ext(ext);
  const std::string unused = used ? "" : unused_member_problem(g.key, ext);
  if (m.link && (used || !unused.empty())) {
    g.sample_like = true;
    if (g.problem.empty()) {
      g.problem = "member " + m.name + " is a link, not a file: write the shard with the files themselves "
                  "(tar --dereference --hard-dereference)";
    }
    return;
  }
  if (!unused.empty()) {
    g.sample_like = true;
    if (g.problem.empty()) g.problem = "member " + m.name + ": " + unused;
    return;
  }
  if (is_image_ext(ext)) {
    if (g.image) g.problem = "member " + m.name + ": a second image for key " + g.key + " (after " + g.image->name + ")";
    g.image = &m;
  } else if (is_label_ext(ext) && (!g.label || ext == "cls")) {
    if (g.label && g.label_ext == "cls") g.problem = "member " + m.name + ": a second .cls label for key " + g.key;
    g.label = &m;
    g.label_ext = ext;
  }
}

// Group `g` as a sample of shard `shard`, or a problem; groups with neither an image nor a
// label (other files) are no samples.
void finish_group(const Group& g, uint32_t shard, const ShardSet& set, ShardIndex& out) {
  const std::string where = set.root + "/" + set.names[shard];
  if (!g.image && !g.label && !g.sample_like) return;
  std::string problem = g.problem;
  int label = -1;
  if (problem.empty() && !g.image) {
    problem = "key " + g.key + " has no image (" + g.key + ".jpg, .jpeg or .png; it has " + g.label->name + ")";
  } else if (problem.empty() && !g.label) {
    problem = "key " + g.key + " has no label (" + g.key + ".cls or .json; it has " + g.image->name + ")";
  } else if (problem.empty() && g.label->bytes > kMaxKeptMemberBytes) {
    problem = "member " + g.label->name + ": a label of " + std::to_string(g.label->bytes) + " bytes, more than the " +
              std::to_string(kMaxKeptMemberBytes / 1024) + " KiB a label member may have: keep other data in a " +
              "member of its own";
  } else if (problem.empty()) {
    label = parse_label(g.label_ext, g.label->data, problem);
    if (!problem.empty()) problem = "member " + g.label->name + ": " + problem;
  }
  if (!problem.empty()) {
    out.problems.emplace_back(where, problem);
    return;
  }
  out.items.push_back({shard, g.image->offset, g.image->bytes, label, g.image->name});
}

// The samples of one shard's members, in order; `seen` holds every key met so far (with
// the shard it was first met in) to find duplicates.
void group_shard(const TarListing& listing, uint32_t shard, const ShardSet& set,
                 std::unordered_map<std::string, uint32_t>& seen, ShardIndex& out) {
  const std::string where = set.root + "/" + set.names[shard];
  if (!listing.problem.empty()) out.problems.emplace_back(where, listing.problem);
  Group g;
  for (const TarMember& m : listing.members) {
    const auto [key, ext] = key_and_ext(m.name);
    if (key != g.key || g.key.empty()) {
      if (!g.key.empty()) finish_group(g, shard, set, out);
      g = Group();
      g.key = key;
      const auto [it, fresh] = seen.emplace(key, shard);
      if (!fresh) {
        g.problem = "member " + m.name + ": a duplicate key " + key + " (met before in " + set.names[it->second] +
                    "; a sample's members must be next to each other, and keys unique)";
      }
    }
    add_member(g, m, ext);
  }
  if (!g.key.empty()) finish_group(g, shard, set, out);
}

std::vector<TarListing> list_shards(const ShardSet& set, int io_threads, double latency_ms) {
  std::vector<TarListing> listings(set.names.size());
  std::atomic<size_t> next{0};
  const auto keep = [](const std::string& name) { return is_label_ext(key_and_ext(name).second); };
  const auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < listings.size();) listings[i] = list_tar(set.root + "/" + set.names[i], keep, latency_ms);
  };
  std::vector<std::thread> threads;
  const size_t n = std::min<size_t>(std::max(1, io_threads), listings.size());
  for (size_t t = 0; t < n; ++t) threads.emplace_back(work);
  for (std::thread& t : threads) t.join();
  return listings;
}

}  // namespace

ShardIndex walk_shards(const ShardSet& shards, int io_threads, double read_latency_ms) {
  const std::vector<TarListing> listings = list_shards(shards, io_threads, read_latency_ms);
  ShardIndex out;
  std::unordered_map<std::string, uint32_t> seen;
  for (size_t s = 0; s < listings.size(); ++s) group_shard(listings[s], static_cast<uint32_t>(s), shards, seen, out);
  return out;
}

namespace {

// The index as stored images; problems are an error under --on-bad-sample fail.
StoredIndex stored_index(const ImageOptions& opts, const ShardSet& shards, ShardIndex index) {
  if (!index.problems.empty() && parse_bad_sample_policy(opts.on_bad_sample) == BadSamplePolicy::kFail) {
    const auto& [where, problem] = index.problems.front();
    const size_t more = index.problems.size() - 1;
    throw ConfigError(where + ": " + problem + (more ? " (and " + std::to_string(more) + " more problems)" : "") +
                      ": fix the shards, or pass --on-bad-sample skip to leave those samples out");
  }
  StoredIndex out;
  out.name = "webdataset";
  out.root = shards.root;
  out.files = shards.names;
  out.members = true;
  out.skipped = std::move(index.problems);
  uint64_t h = kFnvOffset;
  for (size_t i = 0; i < shards.names.size(); ++i) h = fnv1a(shards.names[i] + '\0' + std::to_string(shards.sizes[i]) + '\n', h);
  for (const StoredItem& it : index.items) {
    h = fnv1a(std::to_string(it.file) + ' ' + std::to_string(it.offset) + ' ' + std::to_string(it.bytes) + ' ' +
                  std::to_string(it.label) + '\n', h);
    out.num_classes = std::max(out.num_classes, it.label + 1);
  }
  out.items = std::move(index.items);
  out.description = "webdataset/v1 shards=" + hex64(h) + " n=" + std::to_string(out.items.size());
  return out;
}

}  // namespace

std::shared_ptr<const Dataset> make_webdataset(const ImageOptions& opts, const std::string& path) {
  const auto start = std::chrono::steady_clock::now();
  const ShardSet shards = find_shards(path);
  std::optional<ShardIndex> index = read_shard_index(shards);
  const bool from_file = index.has_value();
  if (!index) index = walk_shards(shards, std::max(1, io_threads_for(opts.io_threads)), opts.emulate_read_latency_ms);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  spdlog::info("webdataset {}: {} samples in {} shards, indexed in {:.2f} s ({})", path, index->items.size(),
               shards.names.size(), seconds, from_file ? "from " + shards.index_file : "walking the tar headers");
  return make_stored_images(opts, stored_index(opts, shards, std::move(*index)));
}

}  // namespace tandem::data
