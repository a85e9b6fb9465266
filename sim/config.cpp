// YAML inputs (sim/config.hpp). The loaders are split by file kind:
//   config_yaml.cpp        strict scalars, map walking, file loading, preset resolution
//   config_model.cpp       model presets        config_profile.cpp   hardware profiles
//   config_calibration.cpp `calibrated:` curves config_scenario.cpp  scenarios, set_key, to_yaml
//   config_check.cpp       cross-key rules      config_sweep.cpp     sweep specs
//   profile_io.cpp         write_calibration (sim/profile_io.hpp)
#include <cstdlib>

#include "sim/config.hpp"

namespace ulysses {

std::string repo_dir() {
  const char* home = std::getenv("ULYSSES_HOME");
  if (home != nullptr && home[0] != '\0') return home;
  return ULYSSES_SOURCE_DIR;  // defined by sim/CMakeLists.txt
}

}  // namespace ulysses
