#include "tandem/cli/commands.h"

int main(int argc, char** argv) { return tandem::cli::run_cli(argc, argv); }
