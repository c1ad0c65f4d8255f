#include "usage_error.h"

#include <algorithm>
#include <numeric>

#include "tandem/common/text.h"

namespace tandem::cli {
namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), 0);
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

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

std::string nearest(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::string::npos;
  for (const std::string& c : candidates) {
    const size_t d = edit_distance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  const size_t limit = std::max<size_t>(1, std::max(word.size(), best.size()) / 3);
  return best_distance >= 1 && best_distance <= limit ? best : "";
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
      const std::string guess = nearest(arg, commands);
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
  if (command == nullptr) return std::string(error.what()) + ": name one (tandem --help lists them)";
  const std::vector<std::string> flags = flag_names(*command);
  for (int i = first + 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (!arg.starts_with("--") || is_flag_of(flags, arg)) continue;
    const std::string name = arg.substr(0, arg.find('='));
    const std::string guess = nearest(name, flags);
    return "unknown flag '" + printable(name, 40) + "' for 'tandem " + command->get_name() + "'" +
           (guess.empty() ? "" : ", did you mean '" + guess + "'?") + " (tandem " + command->get_name() +
           " --help lists its flags)";
  }
  return std::string(error.what()) + " (tandem " + command->get_name() + " --help)";
}

}  // namespace tandem::cli
