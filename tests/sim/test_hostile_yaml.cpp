// Hostile YAML inputs (issue 17): the duplicate-key check is linear (a 1 MB file of 80k keys used to
// take ~20 s in a quadratic scan), and still names the duplicate and its line.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "sim/config.hpp"
#include "core/errors.hpp"

namespace fs = std::filesystem;
using namespace ulysses;

namespace {
// Seconds to load a scenario file of `keys` distinct keys plus one duplicate (last); the error text.
double load_seconds(const fs::path& dir, int keys, std::string& what) {
  const std::string path = (dir / ("keys-" + std::to_string(keys) + ".yaml")).string();
  {
    std::ofstream f(path);
    for (int i = 0; i < keys; ++i) f << "key_number_" << i << ": " << i << "\n";
    f << "key_number_17: again\n";  // the duplicate, last
  }
  const auto t0 = std::chrono::steady_clock::now();
  try {
    (void)load_scenario(path);
  } catch (const core::InputError& e) {
    what = e.what();
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

TEST_CASE("a YAML map of 80000 keys is checked for duplicates in linear time", "[config][hostile]") {
  const fs::path dir = fs::temp_directory_path() / ("ulysses_hostile_yaml_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string what20, what80;
  // the faster of two loads each: a ratio of single timings failed once under a loaded `ctest -j16`
  const double t20 = std::min(load_seconds(dir, 20000, what20), load_seconds(dir, 20000, what20));
  const double t80 = std::min(load_seconds(dir, 80000, what80), load_seconds(dir, 80000, what80));
  REQUIRE(fs::file_size(dir / "keys-80000.yaml") > 1000000);
  fs::remove_all(dir);
  INFO(what80 << "; 20k keys " << t20 << " s, 80k keys " << t80 << " s");
  CHECK(what80.find("key_number_17: duplicate key (line 80001)") != std::string::npos);
  CHECK(what20.find("key_number_17: duplicate key (line 20001)") != std::string::npos);
  // 4x the keys: a linear check takes ~4x the time, the quadratic scan took 16x (~20 s at 80k, release
  // build); a ratio, so that a slow machine or a sanitizer build does not decide it
  CHECK(t80 < 8 * t20 + 0.5);
}
