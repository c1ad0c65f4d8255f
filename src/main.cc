#include <csignal>

#include "tandem/cli/commands.h"
#include "tandem/common/crash_report.h"
#include "tandem/common/file_limit.h"
#include "tandem/common/memory_reuse.h"

int main(int argc, char** argv) {
  tandem::install_crash_report();
  tandem::keep_freed_memory();
  tandem::raise_file_limit();
  // A file grown past RLIMIT_FSIZE is a failed write (EFBIG), said by whoever wrote it (a
  // checkpoint, metrics.jsonl: record_file.h), not a process killed without a word.
  std::signal(SIGXFSZ, SIG_IGN);
  return tandem::cli::run_cli(argc, argv);
}
