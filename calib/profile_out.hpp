#pragma once
// Profile writing: measured curves put back into a hardware profile file (the `calibrated:`
// section, docs/INPUTS.md; sim/config.hpp reads it and emits its text, calibration_to_yaml).
#include <optional>
#include <string>

#include "sim/scenario.hpp"

namespace ulysses::calib {

// Replaces the top-level `calibrated:` section of the profile file (or appends one), keeping
// every other line, comment and key order as it was. The result is loaded back with
// load_profile() before it replaces the file; throws InputError if the file cannot be read or
// written, if it is not a valid profile, or if `c` holds values the loader would reject.
void write_calibration(const std::string& profile_path, const Calibration& c);

// Where `ulysses calibrate` puts its result. No profile_out: returns the section as YAML (to print);
// else writes the base profile (`profile`, a name or path as --profile takes it) with c as its section
// to profile_out in one atomic write (as write_calibration) and returns the line saying so; profile_out
// is left as it was when anything fails. InputError keyed --profile / --profile-out.
std::string write_profile_out(const std::string& profile, const std::optional<std::string>& profile_out,
                              const std::string& profile_name, const Calibration& c);

}  // namespace ulysses::calib
