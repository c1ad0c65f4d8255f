#include "tandem/data/sources/torchvision_folder.h"

#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "tandem/common/error.h"
#include "tandem/common/files.h"
#include "tandem/common/hash.h"
#include "tandem/common/text.h"
#include "tandem/data/sources/stored_images.h"

namespace tandem::data {
namespace {

// The sample list: "label<TAB>path" lines (paths relative to the root, or absolute).
StoredIndex read_list(const std::string& text, const nlohmann::json& d, const std::string& source) {
  StoredIndex index;
  index.name = "python";
  index.root = d.at("root").get<std::string>();
  index.class_names = d.at("classes").get<std::vector<std::string>>();
  index.num_classes = static_cast<int>(index.class_names.size());
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const size_t tab = line.find('\t');
    int label = -1;
    try {
      label = tab == std::string::npos ? -1 : std::stoi(line.substr(0, tab));
    } catch (const std::exception&) {
    }
    if (label < 0 || label >= index.num_classes) {
      throw ConfigError(source + ": its sample list has a line tandem cannot read (\"" + printable(line, 80) +
                        "\"): the dataset's Python process wrote it wrong");
    }
    index.files.push_back(line.substr(tab + 1));
    index.items.push_back({static_cast<uint32_t>(index.files.size() - 1), 0, 0, label, ""});
  }
  return index;
}

}  // namespace

std::shared_ptr<const Dataset> make_torchvision_folder(ImageOptions images, const std::string& native_json,
                                                       const std::string& source, const std::string& description) {
  const nlohmann::json d = nlohmann::json::parse(native_json);
  const std::string list_file = d.at("list_file").get<std::string>();
  std::optional<std::string> text = read_file(list_file);
  std::error_code ec;
  std::filesystem::remove(list_file, ec);
  if (!text) throw ConfigError(source + ": cannot read its sample list " + printable(list_file, 200));
  StoredIndex index = read_list(*text, d, source);
  if (index.items.size() != d.at("count").get<uint64_t>() || index.items.empty()) {
    throw ConfigError(source + ": its sample list holds " + std::to_string(index.items.size()) + " samples where " +
                      "the dataset has " + d.at("count").dump() + ": an image folder needs at least one image");
  }
  const std::string kind = d.value("kind", std::string("torchvision-folder/v1"));
  const std::string output = d.value("output", std::string("float32")) == "uint8" ? "uint8" : "float32";
  index.description = description + " native=" + printable(kind, 40) + " output=" + output +
                      " list=" + hex64(fnv1a(*text)) +
                      " n=" + std::to_string(index.items.size());
  images.pipeline = d.at("steps").dump();
  const size_t n = index.items.size();
  const int classes = index.num_classes;
  auto dataset = make_stored_images(images, std::move(index));
  spdlog::info("{} is {} of {} images in {} classes, made natively (decoded and augmented in C++): {}", source,
               printable(d.value("what", std::string("a torchvision image folder")), 60), n, classes,
               printable(d.value("transform", std::string()), 300));
  const std::string in_python = d.value("in_python", std::string());
  if (!in_python.empty()) spdlog::info("{}: {}", source, printable(in_python, 400));
  return dataset;
}

}  // namespace tandem::data
