#pragma once
// What the YAML input tests share (tests/sim/test_config*.cpp): a fresh temp directory per test case, small file
// helpers, a valid scenario and the message of the InputError that loading a text throws.
#include <catch2/catch.hpp>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <unistd.h>

#include "core/errors.hpp"
#include "sim/config.hpp"

namespace ulysses::test_config {

namespace fs = std::filesystem;


// A fresh directory per test case under the system temp dir.
inline fs::path temp_dir() {
  static std::atomic<int> counter{0};
  const fs::path d = fs::temp_directory_path() /
                     ("ulysses_test_config_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  fs::create_directories(d);
  return d;
}

inline std::string write(const fs::path& path, const std::string& text) {
  std::ofstream(path) << text;
  return path.string();
}

inline std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The message of the InputError that loading `text` as a scenario throws, with the file path
// replaced by "x.yaml"; "" when it loads.
inline std::string scenario_error(const std::string& text) {
  const std::string path = write(temp_dir() / "x.yaml", text);
  try {
    load_scenario(path);
  } catch (const core::InputError& e) {
    std::string m = e.what();
    if (m.rfind(path, 0) == 0) m = "x.yaml" + m.substr(path.size());
    return m;
  }
  return "";
}

inline const std::string kValid = R"(model: llama-3.1-8b
profile: h100-sxm-80gb
gpus: 8
plan:
  sp_size: 8
  seq_len: 65536
)";

inline std::string replace(std::string s, const std::string& from, const std::string& to) {
  const auto at = s.find(from);
  REQUIRE(at != std::string::npos);
  return s.replace(at, from.size(), to);
}

inline Scenario valid_scenario() {
  return load_scenario(write(temp_dir() / "valid.yaml", kValid));
}


}  // namespace ulysses::test_config
