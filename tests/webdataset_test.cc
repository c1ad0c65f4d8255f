// "webdataset:PATH" and "manifest:FILE": the same generated JPEGs as tar shards (written by
// Python's tarfile, GNU and PAX formats), as a manifest, and in class folders give the same
// samples; every kind of broken shard or manifest line gives its message; the index file of
// `tandem index` is used while it matches the shards, and a stale one is noticed.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "image_fixtures.h"
#include "process_helpers.h"
#include "shard_fixtures.h"
#include "tandem/common/error.h"
#include "tandem/data/sources/image_folder.h"
#include "tandem/data/sources/manifest.h"
#include "tandem/data/sources/source_kinds.h"
#include "tandem/data/sources/tar.h"
#include "tandem/data/sources/webdataset.h"

namespace tandem::data {
namespace {

namespace fs = std::filesystem;
using testing::TarEntry;
using testing::TempDir;
using testing::bytes_of;
using testing::cls;
using testing::encode_jpeg;
using testing::encode_png;
using testing::gradient_image;
using testing::read_bytes;
using testing::write_bytes;
using testing::write_tar;

const char* kPipeline = "decode,random_resized_crop(24),hflip";

// Two classes of generated images (JPEG and PNG, one in a subfolder) under root/folder.
void make_classes(const fs::path& folder) {
  write_bytes(folder / "cats" / "a.jpg", encode_jpeg(gradient_image(40, 50, 3, 1)));
  write_bytes(folder / "cats" / "b.JPEG", encode_jpeg(gradient_image(30, 60, 3, 2)));
  write_bytes(folder / "cats" / "sub" / "c.jpg", encode_jpeg(gradient_image(33, 45, 1, 3)));
  write_bytes(folder / "dogs" / "d.png", encode_png(gradient_image(40, 40, 3, 4), PNG_FORMAT_RGB));
  write_bytes(folder / "dogs" / "e.jpg", encode_jpeg(gradient_image(64, 48, 3, 5)));
}

void make_shards(const fs::path& folder, const fs::path& shards, const std::string& format,
                 const std::string& prefix = "") {
  ASSERT_TRUE(testing::folder_as_shards(folder, shards, 2, format, prefix));
}

DataOptions options(const std::string& data) {
  DataOptions opts;
  opts.data = data;
  opts.pipeline = kPipeline;
  opts.seed = 5;
  opts.io_threads = 4;
  return opts;
}

std::vector<uint8_t> sample(const Dataset& d, uint64_t index, uint32_t epoch, int64_t* label) {
  std::vector<uint8_t> out(d.info().sample_bytes());
  *label = d.produce(index, epoch, std::as_writable_bytes(std::span<uint8_t>(out)));
  return out;
}

// Every sample (and label) of `a` and `b` is the same, in two epochs.
void expect_same_samples(const Dataset& a, const Dataset& b) {
  ASSERT_EQ(a.info().size, b.info().size);
  EXPECT_EQ(a.info().num_classes, b.info().num_classes);
  for (uint32_t epoch = 0; epoch < 2; ++epoch) {
    for (uint64_t i = 0; i < a.info().size; ++i) {
      int64_t la = -1, lb = -2;
      EXPECT_EQ(sample(a, i, epoch, &la), sample(b, i, epoch, &lb)) << "sample " << i;
      EXPECT_EQ(la, lb) << "sample " << i;
    }
  }
}

// The message making the dataset (and its sample 0) raises, or "".
std::string error_of(const DataOptions& opts) {
  try {
    auto d = make_dataset(opts);
    int64_t label = 0;
    sample(*d, 0, 0, &label);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(WebDataset, ShardsGiveTheSameSamplesAsClassFoldersInGnuAndPaxTars) {
  TempDir dir;
  make_classes(dir.path() / "folder");
  const auto folder = make_dataset(options("imagefolder:" + (dir.path() / "folder").string()));
  for (const std::string format : {"GNU", "PAX", "USTAR"}) {
    const fs::path shards = dir.path() / format;
    make_shards(dir.path() / "folder", shards, format);
    const auto wds = make_dataset(options("webdataset:" + shards.string()));
    EXPECT_EQ(wds->info().name, "webdataset");
    expect_same_samples(*folder, *wds);
    const auto pattern = make_dataset(options("webdataset:" + (shards / "shard-{000..001}.tar").string()));
    EXPECT_EQ(pattern->info().fingerprint, wds->info().fingerprint);
  }
}

TEST(WebDataset, LongMemberNamesOfGnuAndPaxTarsAreRead) {
  TempDir dir;
  make_classes(dir.path() / "folder");
  const std::string prefix = std::string(120, 'p') + "/" + std::string(90, 'q') + "/";  // past ustar's 100 + 155
  for (const std::string format : {"GNU", "PAX"}) {
    const fs::path shards = dir.path() / format;
    make_shards(dir.path() / "folder", shards, format, prefix);
    const TarListing listing = list_tar((shards / "shard-000.tar").string(), [](const std::string&) { return true; });
    ASSERT_EQ(listing.problem, "");
    ASSERT_FALSE(listing.members.empty());
    EXPECT_EQ(listing.members[0].name, prefix + "cats/a.jpg");
    EXPECT_EQ(listing.members[0].data, std::string(reinterpret_cast<const char*>(read_bytes(dir.path() / "folder/cats/a.jpg").data()),
                                                   listing.members[0].bytes));
    const auto folder = make_dataset(options("imagefolder:" + (dir.path() / "folder").string()));
    expect_same_samples(*folder, *make_dataset(options("webdataset:" + shards.string())));
  }
}

TEST(WebDataset, FingerprintCoversShardNamesSizesAndTheIndex) {
  TempDir dir;
  make_classes(dir.path() / "folder");
  const fs::path a = dir.path() / "a";
  make_shards(dir.path() / "folder", a, "GNU");
  const auto fingerprint = [](const fs::path& p) { return make_dataset(options("webdataset:" + p.string()))->info(); };
  const DatasetInfo base = fingerprint(a);
  // Same names and sizes, one label changed in place: only the index differs.
  fs::copy(a, dir.path() / "label");
  const TarListing listing = list_tar((a / "shard-000.tar").string(), [](const std::string&) { return false; });
  ASSERT_EQ(listing.members[1].name, "cats/a.cls");
  std::vector<uint8_t> tar = read_bytes(a / "shard-000.tar");
  tar[listing.members[1].offset] = '1';
  write_bytes(dir.path() / "label" / "shard-000.tar", tar);
  // A shard renamed, and a shard grown.
  fs::copy(a, dir.path() / "name");
  fs::rename(dir.path() / "name" / "shard-001.tar", dir.path() / "name" / "shard-002.tar");
  fs::copy(a, dir.path() / "size");
  std::ofstream(dir.path() / "size" / "shard-001.tar", std::ios::app) << std::string(512, '\0');
  for (const char* changed : {"label", "name", "size"}) {
    const DatasetInfo other = fingerprint(dir.path() / changed);
    EXPECT_NE(other.fingerprint, base.fingerprint) << changed;
    EXPECT_NE(describe_difference(other.description, base.description).find("shards"), std::string::npos) << changed;
  }
  EXPECT_EQ(fingerprint(a).fingerprint, base.fingerprint);
}

// A shard set with one problem, and the words its error must hold.
struct BrokenCase {
  std::string name;
  std::vector<std::vector<TarEntry>> shards;  // shard-000.tar, shard-001.tar, ...
  std::vector<std::string> words;
};

std::vector<BrokenCase> broken_cases() {
  const std::vector<uint8_t> jpeg = encode_jpeg(gradient_image(20, 20, 3, 9));
  return {
      {"no label", {{{"k1.jpg", jpeg}, {"k1.cls", bytes_of("0")}, {"k2.jpg", jpeg}}}, {"shard-000.tar", "key k2 has no label"}},
      {"no image", {{{"k1.jpg", jpeg}, {"k1.cls", bytes_of("0")}, {"k2.cls", bytes_of("1")}}}, {"shard-000.tar", "key k2 has no image"}},
      {"duplicate key", {{{"k1.jpg", jpeg}, {"k1.cls", bytes_of("0")}}, {{"k1.jpg", jpeg}, {"k1.cls", bytes_of("1")}}},
       {"shard-001.tar", "member k1.jpg", "duplicate key k1", "shard-000.tar"}},
      {"bad cls", {{{"k0.jpg", jpeg}, {"k0.cls", bytes_of("0")}, {"k1.jpg", jpeg}, {"k1.cls", bytes_of("cat")}}}, {"shard-000.tar", "member k1.cls", "label 'cat'"}},
      {"bad json", {{{"k0.jpg", jpeg}, {"k0.json", bytes_of("{\"label\": 0}")}, {"k1.jpg", jpeg},
                     {"k1.json", bytes_of("{\"class\": 2}")}}}, {"shard-000.tar", "member k1.json", "\"label\""}},
      {"dotted key", {{{"k0.jpg", jpeg}, {"k0.cls", bytes_of("0")}, {"k1.0001.jpg", jpeg}, {"k1.0001.cls", bytes_of("1")}}},
       {"shard-000.tar", "member k1.0001.jpg", "its key is 'k1'", "e.g. k1_0001.jpg"}},
      {"webp", {{{"k0.jpg", jpeg}, {"k0.cls", bytes_of("0")}, {"k1.webp", jpeg}, {"k1.cls", bytes_of("1")}}},
       {"shard-000.tar", "member k1.webp", "a .webp image: tandem decodes .jpg, .jpeg and .png"}},
      {"link", {{{"k0.jpg", jpeg}, {"k0.cls", bytes_of("0")}, {"k1.jpg -> k0.jpg", {}}, {"k1.cls", bytes_of("1")}}},
       {"shard-000.tar", "member k1.jpg is a link"}},
      {"big label", {{{"k0.jpg", jpeg}, {"k0.cls", bytes_of("0")}, {"k1.jpg", jpeg},
                      {"k1.json", bytes_of("{\"label\": 1, \"caption\": \"" + std::string(70000, 'x') + "\"}")}}},
       {"shard-000.tar", "member k1.json", "a label of 70027 bytes, more than the 64 KiB"}},
  };
}

TEST(WebDatasetBadShards, EachProblemNamesTheShardAndMemberOrIsSkipped) {
  for (const BrokenCase& c : broken_cases()) {
    TempDir dir;
    for (size_t s = 0; s < c.shards.size(); ++s) {
      ASSERT_TRUE(write_tar(dir.path() / ("shard-00" + std::to_string(s) + ".tar"), c.shards[s]));
    }
    DataOptions opts = options("webdataset:" + dir.str());
    const std::string error = error_of(opts);
    for (const std::string& w : c.words) EXPECT_NE(error.find(w), std::string::npos) << c.name << ": " << error;
    EXPECT_NE(error.find("--on-bad-sample skip"), std::string::npos) << c.name << ": " << error;
    opts.on_bad_sample = "skip";
    const auto d = make_dataset(opts);
    ASSERT_EQ(d->skipped().size(), 1u) << c.name;
    EXPECT_NE(d->skipped()[0].find(c.words[0]), std::string::npos) << c.name;
    EXPECT_EQ(d->info().size, 1u) << c.name;  // the one good sample
  }
}

// Under --on-bad-sample skip every problem is listed, several in one shard too.
TEST(WebDatasetBadShards, SkipListsEveryProblemOfAShard) {
  TempDir dir;
  const std::vector<uint8_t> jpeg = encode_jpeg(gradient_image(20, 20, 3, 9));
  ASSERT_TRUE(write_tar(dir.path() / "s-000.tar", {{"k0.jpg", jpeg}, {"k0.cls", bytes_of("0")}, {"k1.jpg", jpeg},
                                                     {"k1.cls", bytes_of("cat")}, {"k2.jpg", jpeg},
                                                     {"k2.cls", bytes_of("dog")}, {"k3.jpg", jpeg}}));
  DataOptions opts = options("webdataset:" + dir.str());
  opts.on_bad_sample = "skip";
  const std::vector<std::string> skipped = make_dataset(opts)->skipped();
  ASSERT_EQ(skipped.size(), 3u);
  EXPECT_NE(skipped[0].find("member k1.cls: label 'cat'"), std::string::npos) << skipped[0];
  EXPECT_NE(skipped[1].find("member k2.cls: label 'dog'"), std::string::npos) << skipped[1];
  EXPECT_NE(skipped[2].find("key k3 has no label"), std::string::npos) << skipped[2];
}

TEST(WebDatasetBadShards, NotATarAndATruncatedShardAreNamed) {
  TempDir dir;
  const std::vector<uint8_t> jpeg = encode_jpeg(gradient_image(20, 20, 3, 9));
  ASSERT_TRUE(write_tar(dir.path() / "good-000.tar", {{"k1.jpg", jpeg}, {"k1.cls", bytes_of("0")},
                                                        {"k2.jpg", jpeg}, {"k2.cls", bytes_of("1")}}));
  write_bytes(dir.path() / "zip" / "bad-000.tar", std::vector<uint8_t>(2048, 'x'));
  EXPECT_NE(error_of(options("webdataset:" + (dir.path() / "zip").string())).find("bad-000.tar: not a tar file"),
            std::string::npos);
  // Cut inside k2.jpg: k1 stays, k2's member runs past the end.
  const std::vector<uint8_t> whole = read_bytes(dir.path() / "good-000.tar");
  const TarListing listing = list_tar((dir.path() / "good-000.tar").string(), [](const std::string&) { return false; });
  ASSERT_EQ(listing.members.size(), 4u);
  const uint64_t cut = listing.members[2].offset + listing.members[2].bytes / 2;
  write_bytes(dir.path() / "cut" / "cut-000.tar", std::vector<uint8_t>(whole.begin(), whole.begin() + cut));
  DataOptions opts = options("webdataset:" + (dir.path() / "cut").string());
  const std::string error = error_of(opts);
  EXPECT_NE(error.find("cut-000.tar: member k2.jpg"), std::string::npos) << error;
  EXPECT_NE(error.find("runs past the end"), std::string::npos) << error;
  opts.on_bad_sample = "skip";
  EXPECT_EQ(make_dataset(opts)->info().size, 1u);
}

TEST(WebDatasetBadShards, UndecodableImageFailsOrIsSubstituted) {
  TempDir dir;
  const std::vector<uint8_t> jpeg = encode_jpeg(gradient_image(20, 20, 3, 9));
  ASSERT_TRUE(write_tar(dir.path() / "s-000.tar", {{"k1.jpg", bytes_of("not a jpeg")}, {"k1.cls", bytes_of("0")},
                                                     {"k2.jpg", jpeg}, {"k2.cls", bytes_of("1")}}));
  DataOptions opts = options("webdataset:" + dir.str());
  const std::string error = error_of(opts);
  EXPECT_NE(error.find("s-000.tar: member k1.jpg: not a decodable image"), std::string::npos) << error;
  opts.on_bad_sample = "skip";
  const auto d = make_dataset(opts);
  int64_t label = -1;
  sample(*d, 0, 0, &label);
  EXPECT_EQ(label, 1);  // k2 stood in
  ASSERT_EQ(d->skipped().size(), 1u);
}

TEST(WebDatasetIndex, TheIndexFileIsUsedWhileItMatchesAndAStaleOneIsWalkedAgain) {
  TempDir dir;
  make_classes(dir.path() / "folder");
  const fs::path shards = dir.path() / "shards";
  make_shards(dir.path() / "folder", shards, "GNU");
  const fs::path log = dir.path() / "index.log";
  const tandem::testing::Outcome out = tandem::testing::run_capture("index webdataset:" + shards.string(), log);
  ASSERT_EQ(out.code, 0) << out.out;
  EXPECT_NE(out.out.find("indexed 5 samples in 2 shards"), std::string::npos) << out.out;
  const fs::path file = shards / "tandem-index.txt";
  ASSERT_TRUE(fs::exists(file));
  const auto walked = make_dataset(options("webdataset:" + shards.string()));

  // Proof that the file is read: an index whose first label says 1 where the shard says 0.
  std::ifstream in(file);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t samples = text.find("samples 5\n") + 10;
  const size_t label_at = text.find(" 0 cats/a.jpg", samples);
  ASSERT_NE(label_at, std::string::npos) << text;
  text.replace(label_at, 2, " 1");
  std::ofstream(file) << text;
  int64_t label = -1;
  sample(*make_dataset(options("webdataset:" + shards.string())), 0, 0, &label);
  EXPECT_EQ(label, 1);

  // A shard that grew: the index is stale, the headers are walked again (label 0).
  std::ofstream(shards / "shard-001.tar", std::ios::app) << std::string(1024, '\0');
  const ShardSet set = find_shards(shards.string());
  EXPECT_FALSE(read_shard_index(set).has_value());
  const auto again = make_dataset(options("webdataset:" + shards.string()));
  sample(*again, 0, 0, &label);
  EXPECT_EQ(label, 0);
  EXPECT_EQ(again->info().size, walked->info().size);

  std::ofstream(file) << "tandem-webdataset-index 1\nshards two\n";
  const std::string error = error_of(options("webdataset:" + shards.string()));
  EXPECT_NE(error.find("tandem-index.txt line 2"), std::string::npos) << error;
}

// A shard rewritten to the same size (tar pads to 10 KiB blocks) passes the index's size
// check; the member's tar header, read with it, names the stale index. A corrupt index is
// named by its line, whatever its numbers.
TEST(WebDatasetIndex, AShardRewrittenToTheSameSizeAndACorruptIndexAreNamed) {
  TempDir dir;
  const fs::path shards = dir.path() / "shards";
  const std::vector<uint8_t> a = encode_jpeg(gradient_image(20, 20, 3, 1)), b = encode_jpeg(gradient_image(40, 30, 3, 2));
  ASSERT_NE(a.size(), b.size());
  fs::create_directories(shards);
  ASSERT_TRUE(write_tar(shards / "s-000.tar", {{"k1.jpg", a}, {"k1.cls", bytes_of("0")}, {"k2.jpg", b}, {"k2.cls", bytes_of("1")}}));
  const uint64_t size = fs::file_size(shards / "s-000.tar");
  const tandem::testing::Outcome out =
      tandem::testing::run_capture("index webdataset:" + shards.string(), dir.path() / "index.log");
  ASSERT_EQ(out.code, 0) << out.out;
  ASSERT_TRUE(write_tar(shards / "s-000.tar", {{"k2.jpg", b}, {"k2.cls", bytes_of("1")}, {"k1.jpg", a}, {"k1.cls", bytes_of("0")}}));
  ASSERT_EQ(fs::file_size(shards / "s-000.tar"), size);
  const std::string moved = error_of(options("webdataset:" + shards.string()));
  EXPECT_NE(moved.find("s-000.tar: member k1.jpg: the shard is not as it was indexed"), std::string::npos) << moved;
  EXPECT_NE(moved.find("run `tandem index`"), std::string::npos) << moved;

  const fs::path file = shards / "tandem-index.txt";
  std::ifstream in(file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  const auto corrupt = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    const size_t at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    std::ofstream(file) << t.replace(at, from.size(), to);
    return error_of(options("webdataset:" + shards.string()));
  };
  const std::string many = corrupt("samples 2\n", "samples 99999999999\n");
  EXPECT_NE(many.find("tandem-index.txt line"), std::string::npos) << many;
  EXPECT_NE(many.find("run `tandem index`"), std::string::npos) << many;
  const size_t line = text.find("samples 2\n") + 10;
  const std::string first = text.substr(line, text.find('\n', line) - line);  // "0 OFFSET BYTES 0 k1.jpg"
  const std::string wrapped = corrupt(first, "0 1 18446744073709551615 0 k1.jpg");
  EXPECT_NE(wrapped.find("a sample outside the shards"), std::string::npos) << wrapped;
}

// An index that cannot be written (its path is taken by a folder) is one error, and its
// temporary file does not stay behind.
TEST(WebDatasetIndex, AnIndexThatCannotBeWrittenLeavesNothingBehind) {
  TempDir dir;
  ASSERT_TRUE(write_tar(dir.path() / "s-000.tar", {{"k.jpg", bytes_of("x")}, {"k.cls", bytes_of("0")}}));
  fs::create_directories(dir.path() / "tandem-index.txt" / "taken");
  const ShardSet set = find_shards(dir.str());
  std::string error;
  try {
    write_shard_index(set, walk_shards(set, 1));
  } catch (const ConfigError& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("cannot write the index"), std::string::npos) << error;
  EXPECT_NE(error.find("tandem-index.txt"), std::string::npos) << error;
  for (const auto& e : fs::directory_iterator(dir.path())) {
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  }
}

TEST(WebDataset, BracePatternsExpandAndMissingShardsAreNamed) {
  EXPECT_EQ(expand_braces("a-{08..11}.tar"), (std::vector<std::string>{"a-08.tar", "a-09.tar", "a-10.tar", "a-11.tar"}));
  EXPECT_EQ(expand_braces("{x,y}-{1..2}"), (std::vector<std::string>{"x-1", "x-2", "y-1", "y-2"}));
  EXPECT_THROW(expand_braces("a-{1..b}.tar"), ConfigError);
  try {
    expand_braces("a-{11..08}.tar");
    ADD_FAILURE() << "a backward range expanded";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("runs backwards: write the smaller number first, {08..11}"), std::string::npos)
        << e.what();
  }
  TempDir dir;
  ASSERT_TRUE(write_tar(dir.path() / "t-0.tar", {{"k.jpg", bytes_of("x")}, {"k.cls", bytes_of("0")}}));
  const std::string error = error_of(options("webdataset:" + (dir.path() / "t-{0..2}.tar").string()));
  EXPECT_NE(error.find("2 of the 3 shards"), std::string::npos) << error;
  EXPECT_NE(error.find("t-1.tar"), std::string::npos) << error;
}

TEST(Manifest, CsvAndJsonLinesGiveTheSameSamplesAsClassFolders) {
  TempDir dir;
  make_classes(dir.path() / "folder");
  const FolderIndex index = index_folder((dir.path() / "folder").string());
  std::ofstream csv(dir.path() / "folder" / "train.csv"), jsonl(dir.path() / "train.jsonl");
  csv << "path,label\n";
  for (const ImageFile& f : index.files) {
    csv << '"' << f.path << "\"," << f.label << "\r\n";
    jsonl << "{\"path\": \"folder/" << f.path << "\", \"label\": " << f.label << "}\n\n";
  }
  csv.close();
  jsonl.close();
  const auto folder = make_dataset(options("imagefolder:" + (dir.path() / "folder").string()));
  const auto from_csv = make_dataset(options("manifest:" + (dir.path() / "folder" / "train.csv").string()));
  const auto from_jsonl = make_dataset(options("manifest:" + (dir.path() / "train.jsonl").string()));
  EXPECT_EQ(from_csv->info().name, "manifest");
  expect_same_samples(*folder, *from_csv);
  expect_same_samples(*folder, *from_jsonl);
}

TEST(Manifest, BadLinesNameFileAndLine) {
  TempDir dir;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"file,class\na.jpg,0\n", "m.csv:1: the header"},
      {"path,label\na.jpg,0\nb.jpg\n", "m.csv:3: 1 fields"},
      {"path,label\n\na.jpg,cat\n", "m.csv:3: label 'cat' is not a class number"},
      {"path,label\n,1\n", "m.csv:2: an empty path"},
      {"{\"path\": \"a.jpg\", \"label\": 0}\n{\"path\": 3}\n", "m.csv:2: no \"path\" string"},
      {"{\"path\": \"a.jpg\", \"label\": -1}\n", "m.csv:1: label '-1'"},
      {"{\"path\": \"a.jpg\", \"label\": 18446744073709551615}\n", "m.csv:1: label '18446744073709551615'"},
      {"[{\"path\": \"a.jpg\", \"label\": 0}]\n", "m.csv:1: a JSON array: write JSON lines"},
      {"path,label\na.jpg,0\nb.jpg,1\na.jpg,2\n", "m.csv:4: a.jpg with label 2, listed on line 2 with label 0"},
      {"path,label\n\n", "lists no samples"},
  };
  for (const auto& [text, words] : cases) {
    std::ofstream(dir.path() / "m.csv") << text;
    const std::string error = error_of(options("manifest:" + (dir.path() / "m.csv").string()));
    EXPECT_NE(error.find(words), std::string::npos) << text << " -> " << error;
  }
}

// Excel's "CSV UTF-8" starts the file with a byte-order mark; a file listed twice with one
// label is sampled twice.
TEST(Manifest, AByteOrderMarkIsSkippedAndARepeatedLineSamplesTwice) {
  TempDir dir;
  write_bytes(dir.path() / "b.jpg", encode_jpeg(gradient_image(20, 20, 3, 1)));
  std::ofstream(dir.path() / "m.csv") << "\xEF\xBB\xBFpath,label\nb.jpg,1\nb.jpg,1\n";
  const auto d = make_dataset(options("manifest:" + (dir.path() / "m.csv").string()));
  EXPECT_EQ(d->info().size, 2u);
  int64_t label = -1;
  sample(*d, 1, 0, &label);
  EXPECT_EQ(label, 1);
}

TEST(Manifest, MissingFilesAreBadSamples) {
  TempDir dir;
  write_bytes(dir.path() / "b.jpg", encode_jpeg(gradient_image(20, 20, 3, 1)));
  std::ofstream(dir.path() / "m.csv") << "path,label\nmissing.jpg,0\nb.jpg,1\n";
  DataOptions opts = options("manifest:" + (dir.path() / "m.csv").string());
  const std::string error = error_of(opts);
  EXPECT_NE(error.find("missing.jpg: cannot open"), std::string::npos) << error;
  opts.on_bad_sample = "skip";
  const auto d = make_dataset(opts);
  int64_t label = -1;
  sample(*d, 0, 0, &label);
  EXPECT_EQ(label, 1);
  EXPECT_EQ(d->skipped_count(), 1u);
}

}  // namespace
}  // namespace tandem::data
