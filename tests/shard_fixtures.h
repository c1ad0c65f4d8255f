// Test helpers for webdataset shards and manifests: tar files written by Python's tarfile
// (GNU, PAX or USTAR format, as real shards are made), and class folders of generated JPEGs
// to compare them with.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "image_fixtures.h"
#include "tandem/data/sources/image_folder.h"

namespace tandem::data::testing {

// One member of a tar: its name in the archive (ending in '/': a directory; "NAME -> TARGET":
// a hard link to the earlier member TARGET) and its bytes.
using TarEntry = std::pair<std::string, std::vector<uint8_t>>;

// Writes `entries`, in order, into the tar file `tar` with /usr/bin/python3's tarfile in
// `format` ("GNU": long names as 'L' entries; "PAX": as pax path records; "USTAR").
// Returns whether Python succeeded.
inline bool write_tar(const std::filesystem::path& tar, const std::vector<TarEntry>& entries,
                      const std::string& format = "GNU") {
  const std::filesystem::path staging = tar.string() + ".src";
  std::filesystem::create_directories(staging);
  std::ofstream list(staging / "list");
  for (size_t i = 0; i < entries.size(); ++i) {
    list << i << '\t' << entries[i].first << '\n';
    if (entries[i].first.back() != '/' && entries[i].first.find(" -> ") == std::string::npos) write_bytes(staging / std::to_string(i), entries[i].second);
  }
  list.close();
  const std::string script =
      "import os, sys, tarfile\n"
      "src, out, fmt = sys.argv[1:4]\n"
      "with tarfile.open(out, 'w', format=getattr(tarfile, fmt + '_FORMAT')) as t:\n"
      "    for line in open(os.path.join(src, 'list')):\n"
      "        i, name = line.rstrip('\\n').split('\\t', 1)\n"
      "        if ' -> ' in name:\n"
      "            name, target = name.split(' -> ')\n"
      "            ti = tarfile.TarInfo(name); ti.type = tarfile.LNKTYPE; ti.linkname = target; t.addfile(ti)\n"
      "        elif name.endswith('/'):\n"
      "            ti = tarfile.TarInfo(name.rstrip('/')); ti.type = tarfile.DIRTYPE; t.addfile(ti)\n"
      "        else:\n"
      "            p = os.path.join(src, i); ti = tarfile.TarInfo(name); ti.size = os.path.getsize(p)\n"
      "            t.addfile(ti, open(p, 'rb'))\n";
  const std::filesystem::path py = staging / "write.py";
  std::ofstream(py) << script;
  const std::string cmd = "/usr/bin/python3 " + py.string() + " " + staging.string() + " " + tar.string() + " " + format;
  const int rc = std::system(cmd.c_str());
  std::filesystem::remove_all(staging);
  return rc == 0;
}

inline std::string cls(int label) { return std::to_string(label) + "\n"; }
inline std::vector<uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

// The image folder's files as WebDataset members (KEY.ext, KEY.cls), in the folder's index
// order, split evenly over `count` shards shards/shard-000.tar...; `prefix` goes before every
// member name, and the first shard opens with a directory entry (which is no member).
// Returns whether every shard was written.
inline bool folder_as_shards(const std::filesystem::path& folder, const std::filesystem::path& shards, size_t count,
                             const std::string& format = "GNU", const std::string& prefix = "") {
  const FolderIndex index = index_folder(folder.string());
  std::vector<std::vector<TarEntry>> parts(count);
  parts[0].push_back({prefix + "dir/", {}});
  for (size_t i = 0; i < index.files.size(); ++i) {
    const ImageFile& f = index.files[i];
    const std::string stem = f.path.substr(0, f.path.find('.'));
    auto& part = parts[i * count / index.files.size()];
    part.push_back({prefix + f.path, read_bytes(folder / f.path)});
    part.push_back({prefix + stem + ".cls", bytes_of(cls(f.label))});
  }
  std::filesystem::create_directories(shards);
  for (size_t k = 0; k < count; ++k) {
    char name[32];
    std::snprintf(name, sizeof name, "shard-%03zu.tar", k);
    if (!write_tar(shards / name, parts[k], format)) return false;
  }
  return true;
}

}  // namespace tandem::data::testing
