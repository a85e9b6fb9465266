// Hostile YAML inputs (issue 17): the duplicate-key check is linear (a 1 MB file of 80k keys used to
// take ~20 s in a quadratic scan), and still names the duplicate and its line.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "sim/config.hpp"
#include "sim/errors.hpp"

namespace fs = std::filesystem;
using namespace ulysses;

TEST_CASE("a YAML map of 80000 keys is checked for duplicates in linear time", "[config][hostile]") {
  const fs::path dir = fs::temp_directory_path() / ("ulysses_hostile_yaml_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "many-keys.yaml").string();
  {
    std::ofstream f(path);
    for (int i = 0; i < 80000; ++i) f << "key_number_" << i << ": " << i << "\n";
    f << "key_number_17: again\n";  // the duplicate, last
  }
  REQUIRE(fs::file_size(path) > 1000000);
  const auto t0 = std::chrono::steady_clock::now();
  std::string what;
  try {
    (void)load_scenario(path);
  } catch (const InputError& e) {
    what = e.what();
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fs::remove_all(dir);
  INFO(what);
  CHECK(what.find("key_number_17: duplicate key (line 80001)") != std::string::npos);
  CHECK(s < 5.0);  // the quadratic scan took ~20 s here (release build); linear: well under 1 s
}
