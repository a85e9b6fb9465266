#pragma once
// Writing measured curves back into a hardware profile (used by `ulysses calibrate`).
// The `calibrated:` section format is in docs/INPUTS.md; sim/config.hpp reads it.
#include <string>

#include "sim/scenario.hpp"

namespace ulysses {

// Replaces the top-level `calibrated:` section of the profile file (or appends one), keeping
// every other line, comment and key order as it was. The result is loaded back with
// load_profile() before it replaces the file; throws InputError if the file cannot be read or
// written, if it is not a valid profile, or if `c` holds values the loader would reject.
void write_calibration(const std::string& profile_path, const Calibration& c);

// The YAML text of a `calibrated:` section (the `calibrated:` line included).
std::string calibration_to_yaml(const Calibration& c);

}  // namespace ulysses
