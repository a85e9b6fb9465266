// YAML inputs (sim/config.hpp). The loaders are split by file kind:
//   config_yaml.cpp        strict scalars, map walking, file loading, preset resolution
//   config_model.cpp       model presets        config_profile.cpp   hardware profiles
//   config_hf.cpp          Hugging Face config.json files
//   config_calibration.cpp `calibrated:` curves config_scenario.cpp  scenarios, set_key, to_yaml
//   config_check.cpp       cross-key rules      config_sweep.cpp     sweep specs
// Writing a `calibrated:` section into a profile file: calib/profile_out.cpp.
// This file: where the presets are (repo_dir), docs/INPUTS.md "Where presets are found".
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "sim/config.hpp"
#include "sim/fs_query.hpp"
#include "core/errors.hpp"

namespace ulysses {

namespace {

namespace fs = std::filesystem;

fs::path canonical_or_empty(const fs::path& p) {
  std::error_code ec;
  fs::path c = fs::weakly_canonical(p, ec);
  return ec ? fs::path() : c;
}

bool holds_data(const fs::path& d) {
  std::error_code ec;
  return fs::is_directory(d / "scenarios" / "models", ec) && fs::is_directory(d / "profiles", ec);
}

bool is_inside(const fs::path& p, const fs::path& dir) {
  if (p.empty() || dir.empty()) return false;
  const fs::path rel = p.lexically_relative(dir);
  return !rel.empty() && *rel.begin() != "..";
}

}  // namespace

DataDir find_data_dir(const fs::path& exe) {
  DataDir d;
  if (exe.empty()) {
    d.looked = "the executable's path (unknown)";
    return d;
  }
  const fs::path bin = exe.parent_path();
  // 1. an install: <prefix>/bin/ulysses with <prefix>/share/ulysses (cmake --install)
  const fs::path share = (bin.parent_path() / "share" / "ulysses").lexically_normal();
  if (holds_data(share)) return {share.string(), ""};
  d.looked = share.string();
  // 2. the checkout this binary was built from, when it still lives in that build tree
  const fs::path build = canonical_or_empty(ULYSSES_BINARY_DIR), source = canonical_or_empty(ULYSSES_SOURCE_DIR);
  if (is_inside(exe, build)) {
    if (holds_data(source)) return {source.string(), ""};
    d.looked += ", " + source.string() + " (the checkout it was built from)";
  }
  // 3. a checkout holding the binary (a copied checkout with its build folder)
  for (fs::path up = bin; !up.empty(); up = up.parent_path()) {
    if (holds_data(up) && path_is_file(up / "CMakeLists.txt")) return {up.string(), ""};
    if (up == up.root_path()) break;
  }
  d.looked += ", the folders above " + bin.string();
  return d;
}

std::string repo_dir() {
  const char* home = std::getenv("ULYSSES_HOME");
  if (home != nullptr && home[0] != '\0') return home;
  static const fs::path exe = [] {
    std::error_code ec;
    const fs::path p = fs::read_symlink("/proc/self/exe", ec);
    return ec ? fs::path() : canonical_or_empty(p);
  }();
  static const DataDir found = find_data_dir(exe);
  if (found.path.empty())
    throw core::InputError(exe.string(), "ULYSSES_HOME",
                     "not set, and no ulysses data (scenarios/models/, profiles/) next to the executable (looked in " +
                         found.looked + "); set ULYSSES_HOME to a checkout or to <prefix>/share/ulysses");
  return found.path;
}

}  // namespace ulysses
