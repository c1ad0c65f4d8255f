#include "tandem/cli/commands.h"
#include "tandem/common/crash_report.h"
#include "tandem/common/memory_reuse.h"

int main(int argc, char** argv) {
  tandem::install_crash_report();
  tandem::keep_freed_memory();
  return tandem::cli::run_cli(argc, argv);
}
