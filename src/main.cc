#include "tandem/cli/commands.h"
#include "tandem/common/crash_report.h"

int main(int argc, char** argv) {
  tandem::install_crash_report();
  return tandem::cli::run_cli(argc, argv);
}
