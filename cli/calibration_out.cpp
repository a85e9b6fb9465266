#include "cli/calibration_out.hpp"

#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "sim/config_internal.hpp"
#include "core/errors.hpp"
#include "sim/profile_io.hpp"

namespace ulysses::cli {

void write_calibration_output(const po::variables_map& vm, const std::string& profile_name, const Calibration& c) {
  if (!vm.count("profile-out")) {
    std::cout << calibration_to_yaml(c);
    return;
  }
  const std::string src = cfg::resolve(vm["profile"].as<std::string>(), "profiles", "profile", cfg::Where{"", "--profile", ""});
  const std::string dst = vm["profile-out"].as<std::string>();
  std::error_code ec;
  if (std::filesystem::absolute(src, ec) != std::filesystem::absolute(dst, ec))
    std::filesystem::copy_file(src, dst, std::filesystem::copy_options::overwrite_existing, ec);
  if (ec) throw core::InputError("", "--profile-out", fmt::format("cannot write '{}' ({})", dst, ec.message()));
  write_calibration(dst, c);
  std::cout << fmt::format("wrote {} (profile {} with a calibrated: section)\n", dst, profile_name);
}

}  // namespace ulysses::cli
