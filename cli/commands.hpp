#pragma once
// Subcommand registry. Each cli/cmd_<name>.cpp registers itself:
//   static const ulysses::cli::RegisterCommand reg{"plan", "largest sequence that fits", &run_plan};
// The function receives argv with argv[0] = "ulysses <name>" and returns the exit code
// (core/errors.hpp: 0 ok, 1 failure, 2 bad input). main() catches InputError -> exit 2 and
// any other exception -> exit 1, printing one line.
#include <vector>

namespace ulysses::cli {

using CommandFn = int (*)(int argc, char** argv);

struct CommandInfo {
  const char* name;
  const char* summary;
  CommandFn fn;
};

std::vector<CommandInfo>& registry();

struct RegisterCommand {
  RegisterCommand(const char* name, const char* summary, CommandFn fn) { registry().push_back({name, summary, fn}); }
};

}  // namespace ulysses::cli
