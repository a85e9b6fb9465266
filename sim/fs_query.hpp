#pragma once
// Questions about paths a user gave, answered false instead of throwing: std::filesystem's
// throwing overloads turn a name too long or a loop of links into filesystem_error, which is not
// bad input's one line (exit 2); with these the caller's own "cannot be read" names the file.
#include <filesystem>
#include <system_error>

namespace ulysses {

inline bool path_is_file(const std::filesystem::path& p) {
  std::error_code ec;
  return std::filesystem::is_regular_file(p, ec);
}
inline bool path_is_dir(const std::filesystem::path& p) {
  std::error_code ec;
  return std::filesystem::is_directory(p, ec);
}
inline bool path_exists(const std::filesystem::path& p) {
  std::error_code ec;
  return std::filesystem::exists(p, ec);
}
// absolute(p), or p itself when the current directory cannot be read
inline std::filesystem::path path_absolute(const std::filesystem::path& p) {
  std::error_code ec;
  auto a = std::filesystem::absolute(p, ec);
  return ec ? p : a;
}

}  // namespace ulysses
