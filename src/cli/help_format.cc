#include "help_format.h"

namespace tandem::cli {
namespace {

class HelpFormatter final : public CLI::Formatter {
 public:
  std::string make_option_name(const CLI::Option* opt, bool is_positional) const override {
    std::string names = CLI::Formatter::make_option_name(opt, is_positional);
    for (size_t open = names.find('{'); open != std::string::npos; open = names.find('{', open)) {
      const size_t close = names.find('}', open);
      if (close == std::string::npos) break;
      names.erase(open, close - open + 1);
    }
    return names;
  }
};

}  // namespace

std::shared_ptr<CLI::Formatter> help_formatter() { return std::make_shared<HelpFormatter>(); }

}  // namespace tandem::cli
