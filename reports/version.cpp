// Tool version, git revision and JSON schema version (reports/version.hpp).
#include "reports/version.hpp"

#include <fmt/format.h>

#include "ulysses_git_revision.hpp"  // generated at build time (reports/CMakeLists.txt)

namespace ulysses::reports {

std::string tool_version() { return ULYSSES_VERSION; }
std::string git_revision() { return ULYSSES_GIT_REVISION; }

nlohmann::ordered_json version_json() {
  return {{"tool", tool_version()}, {"git", git_revision()}, {"schema", kJsonSchemaVersion}};
}

std::string version_line() {
  return fmt::format("ulysses {} (git {}, JSON schema {})", tool_version(), git_revision(), kJsonSchemaVersion);
}

}  // namespace ulysses::reports
