// A rank group's command: from the launch options, and found as exec would find it,
// with one clear error naming what is wrong and the fix when it cannot run.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "tandem/common/error.h"
#include "tandem/common/text.h"
#include "tandem/launch/rank_group.h"

namespace tandem::launch {
namespace {

namespace fs = std::filesystem;

// Why `path` cannot be executed, or "" when it can.
std::string not_runnable(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return "no such file";
  if (S_ISDIR(st.st_mode)) return "it is a directory";
  if (access(path.c_str(), X_OK) != 0) return "it is not executable";
  return "";
}

// Why the executable file `path` will not start although it is executable: a text file
// without a #! line (exec would hand it to /bin/sh), or a #! line whose interpreter is
// missing; "" for a program or a script whose interpreter is there.
std::string not_startable(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string head(256, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  if (head.starts_with("\x7f" "ELF")) return "";
  if (head.starts_with("#!")) {
    const std::string line = head.substr(2, std::min(head.find('\n'), head.size()) - 2);
    const size_t a = line.find_first_not_of(" \t");
    const std::string interpreter = a == std::string::npos ? "" : line.substr(a, line.find_first_of(" \t\r", a) - a);
    if (interpreter.empty()) return "its #! line names no interpreter: write e.g. #!/usr/bin/env python3";
    if (const std::string why = not_runnable(interpreter); !why.empty()) {
      return "its #! line names " + printable(interpreter, 200) + " (" + why + "): install it, or fix the #! line";
    }
    return "";
  }
  const bool text = !head.empty() && std::all_of(head.begin(), head.end(), [](char ch) {
    const auto u = static_cast<unsigned char>(ch);
    return u >= 0x20 || ch == '\n' || ch == '\t' || ch == '\r';
  });
  return text ? "it is a text file without a #! line: add one (e.g. #!/usr/bin/env python3), or run it through its "
                "interpreter (-- python3 " + printable(path, 200) + ")"
              : "";
}

// The message for command `name` that cannot run because of `why`, with its fix.
std::string cannot_run(const std::string& name, const std::string& why) {
  std::string fix;
  if (why == "it is not executable") {
    fix = ": chmod +x it, or run it through its interpreter (e.g. -- python3 " + printable(name, 200) + ")";
  } else if (why == "no such file") {
    fix = ": check the path (relative paths start at " + fs::current_path().string() + ")";
    if (name.find(' ') != std::string::npos) {
      fix += "; a command in a settings file is a JSON list of words, e.g. [\"python3\", \"train.py\"]";
    }
  }
  return fmt::format("cannot run the command '{}': {}{}", printable(name, 200), why, fix);
}

}  // namespace

std::vector<std::string> rank_command(const LaunchOptions& opts, const std::string& python) {
  if (!opts.command.empty() && !opts.script.empty()) {
    throw ConfigError("both a command (" + printable(joined(opts.command, " "), 400) + ") and --script " + printable(opts.script, 200) +
                      " are given: give one of them");
  }
  if (opts.script.empty() && !opts.script_args.empty()) {
    throw ConfigError("--script-args is given without --script: name the script with --script FILE, or put the "
                      "arguments after the command (-- COMMAND ARGS...)");
  }
  if (!opts.command.empty()) return opts.command;
  if (opts.script.empty()) return {};
  std::vector<std::string> argv = {python, opts.script};
  argv.insert(argv.end(), opts.script_args.begin(), opts.script_args.end());
  return argv;
}

std::string find_command(const std::string& name, const std::string& path) {
  if (name.empty()) throw ConfigError("the command is empty: give the program to run after --");
  if (name.find('/') != std::string::npos) {
    std::string why = not_runnable(name);
    if (why.empty()) why = not_startable(name);
    if (why.empty()) return name;
    throw ConfigError(cannot_run(name, why));
  }
  std::string found_but;
  std::vector<std::string> dirs{""};
  for (char ch : path) {
    if (ch == ':') dirs.emplace_back();
    else dirs.back() += ch;
  }
  for (const std::string& dir : dirs) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    std::string why = not_runnable(candidate);
    if (why.empty()) why = not_startable(candidate);
    if (why.empty()) return candidate;
    if (why != "no such file" && found_but.empty()) found_but = candidate + ": " + why;
  }
  throw ConfigError(fmt::format("cannot run the command '{}': {}: install it, or give its full path{}", printable(name, 200),
                                found_but.empty() ? "not found on PATH (" + printable(path, 300) + ")" : found_but,
                                name.find(' ') != std::string::npos
                                    ? "; a command in a settings file is a JSON list of words, e.g. [\"python3\", "
                                      "\"train.py\"]"
                                    : ""));
}

}  // namespace tandem::launch
