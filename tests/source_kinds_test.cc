// The table of source kinds (source_kinds.h): each kind, registered once, is what
// `--data`, `tandem index`, `tandem inspect` and a learnt dataset's check find.
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "process_helpers.h"
#include "tandem/common/error.h"
#include "tandem/data/core/dataset.h"
#include "tandem/data/sources/source_kinds.h"

namespace tandem::data {
namespace {

namespace fs = std::filesystem;

// --data's value for `kind` with a path that is not on this host.
std::string data_for(const SourceKind& kind, const std::string& missing) {
  switch (kind.needs) {
    case SourceNeeds::kNothing: return std::string(kind.name);
    case SourceNeeds::kFiles: return std::string(kind.name) + ":" + missing;
    case SourceNeeds::kPythonFile: return std::string(kind.name) + ":" + missing + "/data.py:Data";
  }
  return "";
}

TEST(SourceKinds, EveryKindIsFoundByItsNameAndListedWhenANameIsNot) {
  const std::string usage = source_kinds_usage();
  for (const SourceKind& kind : source_kinds()) {
    EXPECT_EQ(&source_kind(data_for(kind, "/nowhere")), &kind) << kind.name;
    EXPECT_NE(usage.find(kind.usage), std::string::npos) << kind.name;
    DataOptions o;
    o.data = data_for(kind, "/nowhere");
    EXPECT_EQ(dataset_dtype(o), kind.dtype) << kind.name;
    EXPECT_EQ(dataset_is_here(o), kind.needs == SourceNeeds::kNothing) << kind.name;
  }
  try {
    source_kind("imagefoldr:/data");
    FAIL() << "an unknown kind was taken";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'imagefolder'?"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(usage), std::string::npos) << e.what();
  }
  EXPECT_THROW(source_kind("synthetic:/data"), ConfigError);  // made, not read: no path
}

// A learnt dataset is checked by the settings its kind fixes without the files: a worker
// serving another kind is named as such, for every kind that has such settings.
TEST(SourceKinds, AKindsFixedSettingsNameAWorkerServingAnotherKind) {
  for (const SourceKind& kind : source_kinds()) {
    if (kind.fixed_settings == nullptr) continue;
    DataOptions ours;
    ours.data = data_for(kind, "/nowhere");
    const std::string kind_tag = kind.fixed_settings(ours).front().second;
    EXPECT_EQ(kind_tag, std::string(kind.name) + "/v1");
    EXPECT_EQ(describe_difference("synthetic/v1 seed=0 size=100", ours),
              "dataset synthetic/v1, this trainer expects " + kind_tag + " (--data)");
    EXPECT_EQ(describe_difference(kind_tag + " seed=0", ours), "") << kind.name;
  }
}

// The binary: `tandem inspect` names the kind and whether this host has what it needs;
// `tandem index` indexes a kind with an index and names those that have one otherwise.
TEST(SourceKinds, InspectAndIndexFindEveryKind) {
  const fs::path dir = testing::fresh_dir("source-kinds");
  for (const SourceKind& kind : source_kinds()) {
    const std::string data = data_for(kind, (dir / "missing").string());
    const auto r = testing::run_capture("inspect --data " + data, dir / "inspect.log", 60);
    ASSERT_EQ(r.code, 0) << r.out;
    const nlohmann::json out = nlohmann::json::parse(r.out.substr(r.out.find('{')));
    EXPECT_EQ(out["data"]["kind"], kind.name) << r.out;
    EXPECT_EQ(out["data"]["here"], kind.needs == SourceNeeds::kNothing) << r.out;
    EXPECT_EQ(out["data"]["index"], kind.index != nullptr) << r.out;
    if (kind.needs != SourceNeeds::kFiles) continue;
    const auto i = testing::run_capture("index " + std::string(kind.name) + ":" + dir.string(), dir / "index.log", 60);
    if (kind.index == nullptr) {
      EXPECT_NE(i.code, 0) << i.out;
      EXPECT_NE(i.out.find("has no index to write; `tandem index` indexes webdataset"), std::string::npos) << i.out;
    } else {
      // An empty folder: the kind's own indexer looks, and finds no shards in it.
      EXPECT_NE(i.code, 0) << i.out;
      EXPECT_EQ(i.out.find("has no index to write"), std::string::npos) << i.out;
      EXPECT_NE(i.out.find(dir.string()), std::string::npos) << i.out;
    }
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tandem::data
