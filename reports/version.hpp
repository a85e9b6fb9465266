#pragma once
// What produced an output: the tool version (CMakeLists.txt project(VERSION)), the git revision
// at build time ("unknown" outside a git checkout, "-dirty" with uncommitted changes) and the
// version of the JSON outputs' layout (docs/OUTPUTS.md "Versions"). `ulysses --version` prints them.
#include <nlohmann/json.hpp>
#include <string>

namespace ulysses::reports {

// Raised when a JSON output changes incompatibly (a key renamed, removed or its meaning changed).
inline constexpr int kJsonSchemaVersion = 2;

std::string tool_version();   // "0.1"
std::string git_revision();   // "4e19833abcde", "4e19833abcde-dirty" or "unknown"
// {"tool": "0.1", "git": "...", "schema": 2}: the `version` key of every JSON result
nlohmann::ordered_json version_json();
std::string version_line();   // "ulysses 0.1 (git 4e19833abcde, JSON schema 2)"

}  // namespace ulysses::reports
