// Decompression bombs in real runs (`tandem worker` and `tandem trainer` on loopback, the
// trainer's own threads, `tandem bench pipeline`): files whose headers declare huge images
// are bad samples like any other, named and skippable, refused before anything of them is
// allocated; a large valid PNG is resized without its full frame in memory. Peak memory
// is each child's ru_maxrss (wait4): a functional bound with a wide margin, not a timing.
#include <sys/resource.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "image_fixtures.h"
#include "process_helpers.h"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using namespace tandem::testing;
using namespace tandem::data::testing;

struct Measured {
  int code = -1;         // exit code, 128 + signal, or -1 when killed at the deadline
  long peak_mib = 0;     // the process's largest resident set
  std::string out;
};

// Waits for `child` under a deadline (then kills it) and reads its peak memory.
Measured wait_measured(Child& child, const fs::path& log, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    rusage usage{};
    if (wait4(child.pid, &status, WNOHANG, &usage) == child.pid) {
      child.reaped = true;
      const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return {code, usage.ru_maxrss / 1024, slurp(log)};
    }
    std::this_thread::sleep_for(50ms);
  }
  return {-1, 0, slurp(log)};  // the Child's destructor kills it
}

Measured run_measured(const std::string& args, const fs::path& log, std::chrono::seconds timeout) {
  Child child = spawn(args, log);
  return wait_measured(child, log, timeout);
}

// Good images in two classes, and three bombs: 100000 x 100000 declared in under 100 bytes (a
// std::bad_alloc before the limit), 40000 x 40000 (a 4.8 GB allocation before the limit)
// and a JPEG declaring 60000 x 60000.
fs::path make_folder_with_bombs(const fs::path& root) {
  for (int i = 0; i < 4; ++i) {
    const std::string n = std::to_string(i);
    write_bytes(root / "cats" / (n + ".jpg"), encode_jpeg(gradient_image(40, 48, 3, i)));
    write_bytes(root / "dogs" / (n + ".png"), encode_png(gradient_image(36, 36, 3, 10 + i), PNG_FORMAT_RGB));
  }
  write_bytes(root / "cats" / "bomb.png", png_declaring(100000, 100000));
  write_bytes(root / "dogs" / "big.png", png_declaring(40000, 40000));
  write_bytes(root / "dogs" / "bomb.jpg", jpeg_declaring(60000, 60000));
  return root;
}

// Peak memory far below any of the declared images (the smallest is 4.8 GB), with room
// for the tandem process itself (LibTorch included).
constexpr long kPeakBoundMib = 1500;

TEST(ImageBombs, AWorkerSkipsThemWithoutAllocatingAndItsTrainerTrainsOn) {
  const fs::path dir = fresh_dir("bombs-worker");
  const fs::path data = make_folder_with_bombs(dir / "data");
  Worker worker = start_worker("--threads 1 --idle-timeout 60 --on-bad-sample skip --data imagefolder:" +
                                   data.string() + " --pipeline 'decode,random_resized_crop(32),hflip'",
                               dir / "worker.log");
  ASSERT_GT(worker.port, 0) << slurp(dir / "worker.log");
  fs::create_directories(dir / "root");  // no copy of the data: the trainer learns it from the worker
  const Measured trainer =
      run_measured("trainer --data imagefolder --sagemaker-root " + (dir / "root").string() + " --workers " +
                       worker.target() + " --steps 4 --batch-size 6 --connect-timeout 60 --summary-json " +
                       (dir / "s.json").string(),
                   dir / "trainer.log", 180s);
  ASSERT_EQ(trainer.code, 0) << trainer.out << slurp(dir / "worker.log");
  const Measured served = wait_measured(worker.child, dir / "worker.log", 30s);
  EXPECT_EQ(served.code, 0) << served.out;
  EXPECT_LT(served.peak_mib, kPeakBoundMib) << "the worker allocated a declared image";
  const auto summary = nlohmann::json::parse(slurp(dir / "s.json"));
  EXPECT_EQ(summary["steps"], 4);
  std::string files;
  for (const auto& f : summary["skipped_files"]) files += f.get<std::string>() + "\n";
  for (const char* name : {"/cats/bomb.png: the header declares a 100000 x 100000 image",
                           "/dogs/big.png: the header declares a 40000 x 40000 image",
                           "/dogs/bomb.jpg: the header declares a 60000 x 60000 image"}) {
    EXPECT_NE(files.find(data.string() + name), std::string::npos) << name << " in\n" << files;
  }
  EXPECT_NE(files.find("more than --max-image-pixels 89478485"), std::string::npos) << files;
}

TEST(ImageBombs, UnderFailTheTrainersOwnThreadsStopNamingTheFileAndTheFlag) {
  const fs::path dir = fresh_dir("bombs-local");
  const fs::path data = dir / "data";
  write_bytes(data / "cats" / "a.jpg", encode_jpeg(gradient_image(40, 48, 3, 1)));
  write_bytes(data / "cats" / "b.png", png_declaring(100000, 100000));
  const std::string args = "trainer --data imagefolder:" + data.string() + " --image-size 32 --local-workers 1" +
                           " --steps 3 --batch-size 2 --sagemaker-root " + dir.string() + " --summary-json " +
                           (dir / "s.json").string();
  const Measured failed = run_measured(args, dir / "fail.log", 180s);
  EXPECT_EQ(failed.code, 4) << failed.out;
  EXPECT_LT(failed.peak_mib, kPeakBoundMib);
  EXPECT_NE(failed.out.find(data.string() + "/cats/b.png: the header declares a 100000 x 100000 image"),
            std::string::npos)
      << failed.out;
  EXPECT_NE(failed.out.find("--max-image-pixels"), std::string::npos) << failed.out;
  EXPECT_EQ(failed.out.find("bad_alloc"), std::string::npos) << failed.out;
  const Measured skipped = run_measured(args + " --on-bad-sample skip", dir / "skip.log", 180s);
  ASSERT_EQ(skipped.code, 0) << skipped.out;
  EXPECT_LT(skipped.peak_mib, kPeakBoundMib);
  const auto summary = nlohmann::json::parse(slurp(dir / "s.json"));
  ASSERT_EQ(summary["skipped_files"].size(), 1u) << summary.dump(2);
  EXPECT_NE(summary["skipped_files"][0].get<std::string>().find("--max-image-pixels"), std::string::npos);
}

// The same on data workers: each refuses the request on its data, in-band, and the
// trainer, whose every source failed on the data, exits 4 (bad data: a requeue cannot
// help), not 5 (a peer, which might).
TEST(ImageBombs, UnderFailEveryWorkerRefusingOnTheDataEndsTheTrainerAsBadData) {
  const fs::path dir = fresh_dir("bombs-workers-fail");
  const fs::path data = dir / "data";
  write_bytes(data / "cats" / "a.jpg", encode_jpeg(gradient_image(40, 48, 3, 1)));
  write_bytes(data / "cats" / "b.png", png_declaring(100000, 100000));
  const std::string serve = "--threads 1 --idle-timeout 60 --image-size 32 --data imagefolder:" + data.string();
  Worker w1 = start_worker(serve, dir / "w1.log");
  Worker w2 = start_worker(serve, dir / "w2.log");
  ASSERT_GT(w1.port, 0) << slurp(dir / "w1.log");
  ASSERT_GT(w2.port, 0) << slurp(dir / "w2.log");
  fs::create_directories(dir / "root");
  const Measured failed =
      run_measured("trainer --data imagefolder --image-size 32 --sagemaker-root " + (dir / "root").string() +
                       " --workers " + w1.target() + "," + w2.target() + " --steps 3 --batch-size 2 --connect-timeout 60",
                   dir / "trainer.log", 180s);
  EXPECT_EQ(failed.code, 4) << failed.out;
  EXPECT_NE(failed.out.find("could not use the data"), std::string::npos) << failed.out;
  EXPECT_NE(failed.out.find("/cats/b.png: the header declares a 100000 x 100000 image"), std::string::npos)
      << failed.out;
}

TEST(ImageBombs, ALargePngIsResizedWithoutHoldingItsFullFrame) {
  // 8000 x 8000 RGB: 183 MiB as a frame, a few MB as a file. Resized to 32 x 32, row by
  // row: the peak stays near that of the same run on a 100 x 100 image.
  const fs::path dir = fresh_dir("bombs-large-png");
  write_pattern_png(dir / "large" / "a" / "big.png", 8000, 8000);
  write_pattern_png(dir / "small" / "a" / "small.png", 100, 100);
  const auto bench = [&](const std::string& folder) {
    return run_measured("bench pipeline --data imagefolder:" + (dir / folder).string() +
                            " --pipeline 'decode,resize(32,32)' --threads 1 --batch-size 1 --seconds 0.5 --json",
                        dir / (folder + ".log"), 240s);
  };
  const Measured small = bench("small"), large = bench("large");
  ASSERT_EQ(small.code, 0) << small.out;
  ASSERT_EQ(large.code, 0) << large.out;
  const size_t line = large.out.rfind("\n{");  // the JSON line after the log's
  const auto result = nlohmann::json::parse(large.out.substr(line == std::string::npos ? 0 : line + 1));
  EXPECT_GT(result["images_per_sec"].get<double>(), 0) << large.out;
  EXPECT_LT(large.peak_mib - small.peak_mib, 64) << "peak " << large.peak_mib << " MiB against " << small.peak_mib
                                                 << " MiB for a 100 x 100 image: the 183 MiB frame was held";
  std::cout << "peak memory, bench pipeline resize(32,32): 8000 x 8000 PNG " << large.peak_mib << " MiB, 100 x 100 PNG "
            << small.peak_mib << " MiB\n";
}

}  // namespace
