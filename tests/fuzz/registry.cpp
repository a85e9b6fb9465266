// The command registry (cli/options.hpp) that cli/main.cpp defines, for the fuzz targets that
// link the CLI's command files without its main().
#include "cli/options.hpp"

namespace ulysses::cli {
std::vector<CommandInfo>& registry() {
  static std::vector<CommandInfo> r;
  return r;
}
}  // namespace ulysses::cli
