// The index file of a webdataset's shards (`tandem index`): written once beside them,
// read at start while the shards' names and sizes match it.
#include <charconv>
#include <chrono>
#include <filesystem>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "tandem/common/error.h"
#include "tandem/common/files.h"
#include "tandem/common/text.h"
#include "tandem/data/sources/webdataset.h"

namespace tandem::data {
namespace fs = std::filesystem;

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

std::string index_webdataset(const std::string& path, int io_threads) {
  const auto start = std::chrono::steady_clock::now();
  const ShardSet shards = find_shards(path);
  const ShardIndex index = walk_shards(shards, io_threads);
  write_shard_index(shards, index);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::string out;
  for (const auto& [where, problem] : index.problems) out += "problem: " + where + ": " + problem + "\n";
  return out + fmt::format("indexed {} samples in {} shards in {:.2f} s ({} shards at once); {} problems\n"
                           "wrote {} (--data webdataset:{} reads it while the shards' names and sizes match it)\n",
                           index.items.size(), shards.names.size(), seconds, io_threads, index.problems.size(),
                           shards.index_file, path);
}

}  // namespace tandem::data
