// Profile writing (calib/profile_out.hpp): a `calibrated:` section spliced into a profile file,
// keeping the rest of the file as it was, and the base profile with the section that calibrate writes.
#include "calib/profile_out.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "sim/config.hpp"
#include "core/errors.hpp"

namespace ulysses::calib {

namespace {

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw core::InputError(path, "file", std::string("cannot be read (") + std::strerror(errno) + ")");
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

// A line that starts a top-level key (column 0, not a comment, not a document marker).
bool is_top_level_key(const std::string& l) {
  return !l.empty() && l[0] != ' ' && l[0] != '\t' && l[0] != '#' && l.rfind("---", 0) != 0 && l.rfind("...", 0) != 0;
}

bool starts_calibrated(const std::string& l) {
  if (l.rfind("calibrated", 0) != 0) return false;
  std::size_t i = std::strlen("calibrated");
  while (i < l.size() && l[i] == ' ') ++i;
  return i < l.size() && l[i] == ':';
}

// The profile at `src` with `c` as its calibrated section, written to `dst` in one step: a temporary file next to
// dst, loaded back, then renamed over it. Errors name dst as a file, or (`flag` set) the flag that named dst.
void write_spliced(const std::string& src, const std::string& dst, const std::string& flag, const Calibration& c) {
  const auto cannot = [&](const std::string& what) {
    return flag.empty() ? core::InputError(dst, "file", what) : core::InputError("", flag, fmt::format("'{}' {}", dst, what));
  };
  load_profile(src);  // the file must be a valid profile before we touch it
  const std::vector<std::string> lines = read_lines(src);

  // Find [begin, end) of the existing section: its key line and the lines indented under it.
  std::size_t begin = lines.size(), end = lines.size();
  for (std::size_t i = 0; i < lines.size(); ++i)
    if (starts_calibrated(lines[i])) {
      begin = i;
      end = i + 1;
      while (end < lines.size() && !is_top_level_key(lines[end])) ++end;
      // trailing blank or comment lines belong to what follows, not to the section
      while (end > begin + 1 && (lines[end - 1].empty() || lines[end - 1].find_first_not_of(' ') == std::string::npos ||
                                 lines[end - 1][lines[end - 1].find_first_not_of(' ')] == '#'))
        --end;
      break;
    }

  std::ostringstream out;
  for (std::size_t i = 0; i < begin; ++i) out << lines[i] << '\n';
  if (begin == lines.size() && !lines.empty() && !lines.back().empty()) out << '\n';
  out << calibration_to_yaml(c);
  for (std::size_t i = end; i < lines.size(); ++i) out << lines[i] << '\n';

  // Write next to the file, check that it loads with the new values, then replace atomically.
  const std::filesystem::path target(dst);
  const std::string tmp =
      (target.parent_path().empty() ? std::filesystem::path(".") : target.parent_path()) / ("." + target.filename().string() + ".tmp.yaml");
  {
    std::ofstream f(tmp);
    if (!f) throw cannot(std::string("cannot be written (") + std::strerror(errno) + ")");
    f << out.str();
    if (!f.flush()) throw cannot("cannot be written (write failed)");
  }
  try {
    const HardwareProfile p = load_profile(tmp);
    if (!p.has_calibration) throw core::InputError(dst, "calibrated", "section was not written");
  } catch (const core::InputError& e) {
    std::remove(tmp.c_str());
    throw core::InputError(dst, e.key(), e.rule());
  }
  std::error_code ec;
  std::filesystem::rename(tmp, dst, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw cannot("cannot be replaced (" + ec.message() + ")");
  }
}

}  // namespace

void write_calibration(const std::string& profile_path, const Calibration& c) { write_spliced(profile_path, profile_path, "", c); }

std::string write_profile_out(const std::string& profile, const std::optional<std::string>& profile_out,
                              const std::string& profile_name, const Calibration& c) {
  if (!profile_out) return calibration_to_yaml(c);
  // the base profile and the section in one write: an interrupted calibrate leaves profile_out as it was
  write_spliced(profile_file(profile, "--profile"), *profile_out, "--profile-out", c);
  return fmt::format("wrote {} (profile {} with a calibrated: section)\n", *profile_out, profile_name);
}

}  // namespace ulysses::calib
