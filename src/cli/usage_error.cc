#include "usage_error.h"

#include <algorithm>

#include "tandem/common/text.h"

namespace tandem::cli {
namespace {

std::vector<std::string> command_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) names.push_back(sub->get_name());
  return names;
}

// The long flags of `app` (and of the top level, whose flags may come after the command).
std::vector<std::string> flag_names(const CLI::App& app) {
  std::vector<std::string> names;
  const CLI::App* level = &app;
  while (level != nullptr) {
    for (const CLI::Option* opt : level->get_options()) {
      for (const std::string& n : opt->get_lnames()) names.push_back("--" + n);
    }
    level = level->get_parent();
  }
  return names;
}

bool is_flag_of(const std::vector<std::string>& flags, const std::string& arg) {
  const std::string name = arg.substr(0, arg.find('='));
  return std::find(flags.begin(), flags.end(), name) != flags.end();
}

}  // namespace

std::string nearest_name(const std::string& word, const std::vector<std::string>& candidates) {
  return nearest(word, candidates, std::max<size_t>(1, word.size() / 3));
}

std::string usage_message(const CLI::App& app, const CLI::ParseError& error, int argc, char** argv) {
  const std::vector<std::string> commands = command_names(app);
  // The command: the first word that is not a flag or a top-level flag's value.
  const CLI::App* command = nullptr;
  int first = 1;
  for (; first < argc; ++first) {
    const std::string arg = argv[first];
    if (arg == "--log-level") {
      ++first;
      continue;
    }
    if (arg.starts_with("-")) continue;
    if (std::find(commands.begin(), commands.end(), arg) == commands.end()) {
      const std::string guess = nearest_name(arg, commands);
      return "unknown command '" + printable(arg, 40) + "'" + (guess.empty() ? "" : ", did you mean '" + guess + "'?") +
             " Commands: " + [&] {
               std::string all;
               for (const auto& c : commands) all += (all.empty() ? "" : ", ") + c;
               return all;
             }() + " (tandem --help)";
    }
    command = app.get_subcommand(arg);
    break;
  }
  if (command == nullptr) return one_line(error.what()) + ": name one (tandem --help lists them)";
  // A command's own commands (tandem bench pipeline) follow it directly.
  std::string path = command->get_name();
  for (; first + 1 < argc; ++first) {
    const std::vector<std::string> subs = command_names(*command);
    if (std::find(subs.begin(), subs.end(), argv[first + 1]) == subs.end()) break;
    command = command->get_subcommand(argv[first + 1]);
    path += std::string(" ") + argv[first + 1];
  }
  const std::vector<std::string> flags = flag_names(*command);
  for (int i = first + 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;  // what follows is the user's command, not tandem's flags
    if (!arg.starts_with("--") || is_flag_of(flags, arg)) continue;
    const std::string name = arg.substr(0, arg.find('='));
    const std::string guess = nearest_name(name, flags);
    return "unknown flag '" + printable(name, 40) + "' for 'tandem " + path + "'" +
           (guess.empty() ? "" : ", did you mean '" + guess + "'?") + " (tandem " + path + " --help lists its flags)";
  }
  // CLI11 says "--port: At Most 1 required but received 2" of a flag given twice.
  const std::string what = one_line(error.what());
  const std::string_view twice = ": At Most 1 required but received ";
  if (const size_t at = what.find(twice); at != std::string::npos) {
    return what.substr(0, at) + " is given " + what.substr(at + twice.size()) +
           " times: it takes one value, so give it once (tandem " + path + " --help)";
  }
  return what + " (tandem " + path + " --help)";
}

std::string separator_problem(const CLI::App& app, int argc, char** argv) {
  const std::vector<CLI::App*> parsed = app.get_subcommands();
  if (parsed.empty()) return "";
  const CLI::App& cmd = *parsed.front();
  const CLI::Option* command = cmd.get_option_no_throw("command");
  if (command == nullptr) return "";
  const std::string name = "tandem " + cmd.get_name();
  int separator = -1, flag = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") {
      separator = i;
      break;
    }
    if (arg == "--command" || arg.starts_with("--command=")) flag = i;
  }
  if (separator >= 0 && flag >= 0) {
    return "the program is given twice, with --command and after --: give it once (" + name +
           " [flags] -- PROGRAM ARGS...)";
  }
  if (separator == argc - 1) {
    return "nothing follows --: give the program to run after it (" + name + " [flags] -- python3 train.py ...), or "
           "leave -- out to run tandem's own trainer";
  }
  if (command->count() > 0 && separator < 0 && flag < 0) {
    return "put -- before your program (" + name + " [flags] -- PROGRAM ARGS...): without it, the flags after the "
           "program are taken as tandem's own";
  }
  return "";
}

std::optional<std::vector<std::string>> words_after_separator(const CLI::App& app, int argc, char** argv) {
  const std::vector<CLI::App*> parsed = app.get_subcommands();
  if (parsed.empty() || parsed.front()->get_option_no_throw("command") == nullptr) return std::nullopt;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--") return std::vector<std::string>(argv + i + 1, argv + argc);
  }
  return std::nullopt;
}

}  // namespace tandem::cli
