#include "tandem/data/sources/manifest.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "tandem/common/error.h"
#include "tandem/common/files.h"
#include "tandem/common/hash.h"
#include "tandem/common/text.h"

namespace tandem::data {
namespace {

constexpr int kMaxLabel = (1 << 24) - 1;

// Complaints about one line of the manifest, naming FILE:LINE.
struct Line {
  const std::string& file;
  size_t number;
  [[noreturn]] void fail(const std::string& what, const std::string& fix) const {
    throw ConfigError(file + ":" + std::to_string(number) + ": " + what + ": " + fix);
  }
};

// One CSV line's fields: commas separate, "double quotes" may hold commas and "" for ".
std::vector<std::string> csv_fields(const std::string& text, const Line& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted && c == '"' && i + 1 < text.size() && text[i + 1] == '"') out.back() += '"', ++i;
    else if (c == '"' && (quoted || out.back().empty())) quoted = !quoted;
    else if (c == ',' && !quoted) out.emplace_back();
    else out.back() += c;
  }
  if (quoted) line.fail("an unclosed quote", "close it with \"");
  return out;
}

int label_of(const std::string& text, const Line& line) {
  int v = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < 0 || v > kMaxLabel) {
    line.fail("label '" + printable(text, 40) + "' is not a class number",
              "write a whole number from 0 to " + std::to_string(kMaxLabel));
  }
  return v;
}

// Each path's label and the line that first gave it: a file listed twice must keep its label.
using Seen = std::unordered_map<std::string, std::pair<int, size_t>>;

void add_sample(StoredIndex& index, Seen& seen, const std::string& path, int label, const Line& line) {
  if (path.empty()) line.fail("an empty path", "name the image file, relative to the manifest's folder");
  const auto [it, fresh] = seen.emplace(path, std::make_pair(label, line.number));
  if (!fresh && it->second.first != label) {
    line.fail(printable(path, 100) + " with label " + std::to_string(label) + ", listed on line " +
                  std::to_string(it->second.second) + " with label " + std::to_string(it->second.first),
              "give a file one label (listing it twice with the same label samples it twice)");
  }
  index.items.push_back({static_cast<uint32_t>(index.files.size()), 0, 0, label, ""});
  index.files.push_back(path);
  index.num_classes = std::max(index.num_classes, label + 1);
}

void csv_line(StoredIndex& index, Seen& seen, const std::string& text, const Line& line) {
  const std::vector<std::string> f = csv_fields(text, line);
  if (f.size() != 2) {
    line.fail(std::to_string(f.size()) + " fields", "write path,label (quote a path that holds a comma)");
  }
  add_sample(index, seen, f[0], label_of(f[1], line), line);
}

void json_line(StoredIndex& index, Seen& seen, const std::string& text, const Line& line) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) line.fail("not a JSON object", "write {\"path\": \"a/b.jpg\", \"label\": 3}");
  if (!j.contains("path") || !j["path"].is_string()) {
    line.fail("no \"path\" string", "write {\"path\": \"a/b.jpg\", \"label\": 3}");
  }
  if (!j.contains("label") || !j["label"].is_number_integer()) {
    line.fail("no whole-number \"label\"", "write {\"path\": \"a/b.jpg\", \"label\": 3}");
  }
  add_sample(index, seen, j["path"].get<std::string>(), label_of(j["label"].dump(), line), line);
}

std::string read_text(const std::string& file) {
  std::optional<std::string> text = read_file(file);
  if (!text) throw ConfigError("cannot read the manifest " + file + ": check the path and its permissions");
  return std::move(*text);
}

}  // namespace

StoredIndex read_manifest(const std::string& file) {
  if (std::filesystem::is_directory(file)) {
    throw ConfigError("--data manifest:" + printable(file, 200) + " is a folder: name the manifest file itself "
                      "(a .csv with a path,label header, or JSON lines)");
  }
  std::string text = read_text(file);
  if (text.starts_with("\xEF\xBB\xBF")) text.erase(0, 3);  // a UTF-8 byte-order mark (Excel's "CSV UTF-8")
  StoredIndex index;
  Seen seen;
  index.name = "manifest";
  const std::string parent = std::filesystem::path(file).parent_path().string();
  index.root = parent.empty() ? "." : parent;
  std::istringstream lines(text);
  bool json = false, started = false;
  size_t number = 0;
  for (std::string l; std::getline(lines, l);) {
    const Line line{file, ++number};
    if (!l.empty() && l.back() == '\r') l.pop_back();
    if (l.find_first_not_of(" \t") == std::string::npos) continue;
    if (!started) {
      started = true;
      const char first = l[l.find_first_not_of(" \t")];
      json = first == '{';
      if (first == '[') {
        line.fail("a JSON array", "write JSON lines: one object {\"path\": ..., \"label\": ...} per line");
      }
      if (!json) {
        if (csv_fields(l, line) != std::vector<std::string>{"path", "label"}) {
          line.fail("the header is '" + printable(l, 80) + "'", "start a CSV manifest with the line path,label");
        }
        continue;
      }
    }
    json ? json_line(index, seen, l, line) : csv_line(index, seen, l, line);
  }
  if (index.items.empty()) {
    throw ConfigError("the manifest " + printable(file, 200) + " lists no samples: add lines path,label (CSV, after " +
                      "the header) or {\"path\": ..., \"label\": ...} (JSON lines)");
  }
  index.description = "manifest/v1 manifest=" + hex64(fnv1a(text)) + " n=" + std::to_string(index.items.size());
  return index;
}

std::shared_ptr<const Dataset> make_manifest(const ImageOptions& opts, const std::string& file) {
  StoredIndex index = read_manifest(file);
  const size_t n = index.items.size();
  auto dataset = make_stored_images(opts, std::move(index));
  spdlog::info("manifest {}: {} images in {} classes, {} samples per epoch", file, n, dataset->info().num_classes,
               dataset->info().size);
  return dataset;
}

}  // namespace tandem::data
