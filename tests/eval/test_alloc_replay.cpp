// The allocator simulation against PyTorch's allocator itself: every recorded trace under
// records/validation/alloc-traces (eval/scripts/run_alst_gpu.sh alloc-trace, one H200) replayed
// through sim/caching_allocator; the reserved bytes must agree after every allocation and free.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "core/errors.hpp"
#include "eval/alloc_replay.hpp"
#include "tests/cli/run_cli.hpp"

using namespace ulysses;
using ulysses::test::record_path;

TEST_CASE("allocator sim replays the recorded traces byte for byte", "[eval][allocator]") {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(record_path("validation/alloc-traces"))) {
    const std::string p = e.path().string();
    if (e.path().filename().string().rfind("trace-", 0) != 0) continue;
    ++n;
    const eval::AllocReplay r = eval::replay_alloc_trace(p);
    INFO(p);
    CHECK(r.allocs > 1000);
    CHECK(r.releases == 1);  // DeepSpeed's empty_cache during the engine's construction
    CHECK(r.max_reserved_gap == 0);
    CHECK(r.simulated_peak_reserved == r.measured_peak_reserved);
    CHECK(r.simulated_reserved_end == r.measured_reserved_end);
  }
  CHECK(n >= 8);
}

TEST_CASE("allocator trace: a malformed line is one input error naming the line", "[eval][allocator]") {
  const auto dir = std::filesystem::temp_directory_path() / "ulysses-alloc-trace-test";
  std::filesystem::create_directories(dir);
  const auto write = [&](const char* name, const char* text) {
    const std::string p = (dir / name).string();
    std::ofstream(p) << text;
    return p;
  };
  const std::string head = "# ulysses allocator trace v1: test\n";
  CHECK_THROWS_WITH(eval::replay_alloc_trace(write("a.txt", "a 0 10 0\n")), Catch::Contains("header"));
  CHECK_THROWS_WITH(eval::replay_alloc_trace(write("b.txt", (head + "a 0 10\n").c_str())),
                    Catch::Contains("line 2") && Catch::Contains("a ID BYTES STREAM"));
  CHECK_THROWS_WITH(eval::replay_alloc_trace(write("c.txt", (head + "a 0 10 0\nf 1\n").c_str())),
                    Catch::Contains("line 3") && Catch::Contains("not allocated"));
  CHECK_THROWS_WITH(eval::replay_alloc_trace(write("d.txt", (head + "x 1\n").c_str())), Catch::Contains("must start with"));
  CHECK_THROWS_AS(eval::replay_alloc_trace((dir / "missing.txt").string()), core::InputError);
  const eval::AllocReplay r = eval::replay_alloc_trace(write("e.txt", (head + "m 20971520 0\na 0 2097152 0\nf 0\n").c_str()));
  CHECK(r.simulated_peak_reserved == 20971520);
  CHECK(r.measured_peak_reserved == 20971520);
  CHECK(r.max_reserved_gap == 0);
  std::filesystem::remove_all(dir);
}
