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
#include "tandem/common/text.h"
#include "tandem/data/sources/bad_samples.h"
#include "tandem/data/sources/read_ahead.h"
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

constexpr int kMaxLabel = (1 << 24) - 1;

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

constexpr const char* kIndexMagic = "tandem-webdataset-index 1";

bool one_line(const std::string& text) { return text.find_first_of("\n\t") == std::string::npos; }

std::string index_text(const ShardSet& shards, const ShardIndex& index) {
  std::string out = std::string(kIndexMagic) + "\nshards " + std::to_string(shards.names.size()) + "\n";
  for (size_t i = 0; i < shards.names.size(); ++i) out += std::to_string(shards.sizes[i]) + " " + shards.names[i] + "\n";
  out += "samples " + std::to_string(index.items.size()) + "\n";
  for (const StoredItem& it : index.items) {
    if (!one_line(it.member)) throw ConfigError("member name " + printable(it.member, 100) + " holds a line break or tab: rename it");
    out += std::to_string(it.file) + " " + std::to_string(it.offset) + " " + std::to_string(it.bytes) + " " +
           std::to_string(it.label) + " " + it.member + "\n";
  }
  out += "problems " + std::to_string(index.problems.size()) + "\n";
  for (const auto& [where, problem] : index.problems) {
    out += printable(where, 1000) + "\t" + printable(problem, 1000) + "\n";
  }
  return out;
}

// Reads an index file line by line; every complaint names the file and the line.
class IndexReader {
 public:
  IndexReader(std::string path, std::string text) : path_(std::move(path)), text_(std::move(text)) {}

  std::string line() {
    if (at_ >= text_.size()) fail("ends early");
    const size_t end = text_.find('\n', at_);
    if (end == std::string::npos) fail("ends without a line break");
    std::string out = text_.substr(at_, end - at_);
    at_ = end + 1;
    ++line_;
    return out;
  }
  // "WORD N" -> N
  uint64_t count(const std::string& word) {
    const std::string l = line();
    uint64_t n = 0;
    if (l.rfind(word + " ", 0) != 0 || !number(l.substr(word.size() + 1), n)) fail("expected '" + word + " N'");
    return n;
  }
  // The next whole number of `text` from `at` (skipping one space after it).
  uint64_t field(const std::string& text, size_t& at) {
    const size_t end = std::min(text.find(' ', at), text.size());
    uint64_t v = 0;
    if (!number(text.substr(at, end - at), v)) fail("expected a whole number at column " + std::to_string(at + 1));
    at = end + 1;
    return v;
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw ConfigError(path_ + " line " + std::to_string(std::max<size_t>(line_, 1)) + ": " + what +
                      ": it is not an index tandem wrote; delete it, or run `tandem index` on the shards again");
  }
  bool done() const { return at_ == text_.size(); }
  size_t left() const { return text_.size() - at_; }

 private:
  static bool number(const std::string& t, uint64_t& v) {
    return !t.empty() && std::from_chars(t.data(), t.data() + t.size(), v).ptr == t.data() + t.size();
  }
  std::string path_, text_;
  size_t at_ = 0, line_ = 0;
};

// The shard list in the file against the shards now: "" or the first difference.
std::string stale_reason(IndexReader& r, const ShardSet& shards) {
  const uint64_t n = r.count("shards");
  if (n != shards.names.size()) {
    return "it lists " + std::to_string(n) + " shards, there are " + std::to_string(shards.names.size());
  }
  for (size_t i = 0; i < n; ++i) {
    const std::string l = r.line();
    size_t at = 0;
    const uint64_t size = r.field(l, at);
    const std::string name = at <= l.size() ? l.substr(at) : "";
    if (name != shards.names[i]) return "it lists shard " + printable(name, 100) + " where there is " + shards.names[i];
    if (size != shards.sizes[i]) {
      return "shard " + name + " had " + std::to_string(size) + " bytes, now " + std::to_string(shards.sizes[i]);
    }
  }
  return "";
}

ShardIndex read_entries(IndexReader& r, const ShardSet& shards) {
  ShardIndex index;
  index.from_file = true;
  const uint64_t samples = r.count("samples");
  index.items.reserve(static_cast<size_t>(std::min<uint64_t>(samples, r.left() / 8)));  // a line is 8 bytes or more
  for (uint64_t i = 0; i < samples; ++i) {
    const std::string l = r.line();
    size_t at = 0;
    StoredItem it;
    const uint64_t file = r.field(l, at);
    it.offset = r.field(l, at);
    it.bytes = r.field(l, at);
    const uint64_t label = r.field(l, at);
    if (file >= shards.names.size() || label > static_cast<uint64_t>(kMaxLabel) || at > l.size() ||
        it.offset > shards.sizes[file] || it.bytes > shards.sizes[file] - it.offset) {
      r.fail("a sample outside the shards it lists");
    }
    it.file = static_cast<uint32_t>(file);
    it.label = static_cast<int>(label);
    it.member = l.substr(at);
    index.items.push_back(std::move(it));
  }
  const uint64_t problems = r.count("problems");
  for (uint64_t i = 0; i < problems; ++i) {
    const std::string l = r.line();
    const size_t tab = l.find('\t');
    if (tab == std::string::npos) r.fail("expected 'WHERE<tab>PROBLEM'");
    index.problems.emplace_back(l.substr(0, tab), l.substr(tab + 1));
  }
  if (!r.done()) r.fail("more lines than it announces");
  return index;
}

}  // namespace

void write_shard_index(const ShardSet& shards, const ShardIndex& index) {
  const std::string text = index_text(shards, index);
  try {
    write_file_atomically(shards.index_file, text);
  } catch (const std::exception& e) {
    throw ConfigError("cannot write the index: " + std::string(e.what()) + "; check that the shards' folder is writable");
  }
}

std::optional<ShardIndex> read_shard_index(const ShardSet& shards) {
  std::error_code ec;
  if (!fs::is_regular_file(shards.index_file, ec)) return std::nullopt;
  std::optional<std::string> text = read_file(shards.index_file);
  if (!text) throw ConfigError("cannot read the index " + shards.index_file + ": check its permissions");
  IndexReader r(shards.index_file, std::move(*text));
  if (r.line() != kIndexMagic) r.fail(std::string("expected '") + kIndexMagic + "'");
  if (const std::string why = stale_reason(r, shards); !why.empty()) {
    spdlog::warn("the index {} is stale ({}): walking the shards' headers instead; run `tandem index` on them again "
                 "to skip this", shards.index_file, why);
    return std::nullopt;
  }
  return read_entries(r, shards);
}

namespace {

// The index as stored images; problems are an error under --on-bad-sample fail.
StoredIndex stored_index(const DataOptions& opts, const ShardSet& shards, ShardIndex index) {
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

std::shared_ptr<const Dataset> make_webdataset(const DataOptions& opts, const std::string& path) {
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
