// ulysses: capacity planning, scenario sweeps and profiling for Ulysses sequence parallelism.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "cli/options.hpp"
#include "reports/version.hpp"
#include "core/errors.hpp"

namespace ulysses::cli {
std::vector<CommandInfo>& registry() {
  static std::vector<CommandInfo> r;
  return r;
}
}  // namespace ulysses::cli

static void usage(FILE* f) {
  auto cmds = ulysses::cli::registry();
  std::sort(cmds.begin(), cmds.end(), [](auto& a, auto& b) { return std::strcmp(a.name, b.name) < 0; });
  std::fprintf(f, "usage: ulysses <command> [options]   (ulysses <command> --help; ulysses --version)\n\ncommands:\n");
  for (auto& c : cmds) std::fprintf(f, "  %-10s %s\n", c.name, c.summary);
}

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? ulysses::core::kExitInput : ulysses::core::kExitOk;
  }
  if (!std::strcmp(argv[1], "--version")) {
    std::printf("%s\n", ulysses::reports::version_line().c_str());
    return std::fflush(stdout) == 0 && !std::ferror(stdout) ? ulysses::core::kExitOk : ulysses::core::kExitFailure;
  }
  for (auto& c : ulysses::cli::registry()) {
    if (std::strcmp(c.name, argv[1]) != 0) continue;
    std::string prog = std::string("ulysses ") + c.name;
    argv[1] = prog.data();
    try {
      return c.fn(argc - 1, argv + 1);
    } catch (const ulysses::core::InputError& e) {
      std::fprintf(stderr, "ulysses: error: %s\n", e.what());
      return ulysses::core::kExitInput;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ulysses %s: error: %s\n", c.name, e.what());
      return ulysses::core::kExitFailure;
    }
  }
  std::fprintf(stderr, "ulysses: error: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return ulysses::core::kExitInput;
}
