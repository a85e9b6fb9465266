// The allocator simulation against PyTorch's allocator itself: every recorded trace under
// records/validation/alloc-traces (eval/scripts/run_alst_gpu.sh alloc-trace, one H200) replayed
// through sim/caching_allocator; the reserved bytes must agree after every allocation and free.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
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

// How much of the sequence a prediction must know: the small pool (<= 1 MiB) does not matter for the
// peak; blocks of 16-64 MiB do. The table: build/tests/ulysses_tests "[.alloc-sensitivity]" -s
TEST_CASE("allocator sim: the small pool hardly moves the reserved peak", "[eval][allocator]") {
  for (const auto& e : std::filesystem::directory_iterator(record_path("validation/alloc-traces"))) {
    if (e.path().filename().string().rfind("trace-", 0) != 0) continue;
    const eval::AllocReplay all = eval::replay_alloc_trace(e.path().string());
    const eval::AllocReplay large = eval::replay_alloc_trace(e.path().string(), (1 << 20) + 1);
    INFO(e.path().string());
    CHECK(large.allocs < all.allocs);
    CHECK(std::abs(double(large.simulated_peak_reserved) / double(all.simulated_peak_reserved) - 1) < 1e-3);
  }
}

TEST_CASE("allocator sim: the reserved peak without the allocations below 1, 16, 64 MiB", "[.alloc-sensitivity]") {
  std::printf("# trace                                   peak   >1MiB  >=16MiB >=64MiB\n");
  std::printf("#                                        (GiB)    (%%)     (%%)     (%%)\n");
  for (const auto& e : std::filesystem::directory_iterator(record_path("validation/alloc-traces"))) {
    const std::string name = e.path().filename().string();
    if (name.rfind("trace-", 0) != 0) continue;
    const double all = double(eval::replay_alloc_trace(e.path().string()).simulated_peak_reserved);
    const auto err = [&](std::int64_t mn) {
      return 100 * (double(eval::replay_alloc_trace(e.path().string(), mn).simulated_peak_reserved) / all - 1);
    };
    std::printf("  %-38s %6.2f %+6.2f %+7.2f %+7.2f\n", name.c_str(), all / double(1 << 30), err((1 << 20) + 1),
                err(16 << 20), err(64 << 20));
  }
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
  const eval::AllocReplay r = eval::replay_alloc_trace(write("e.txt", (head + "m 20971520 0\na 0 2097152 0 # frames: a comment\nf 0\n").c_str()));
  CHECK(r.simulated_peak_reserved == 20971520);
  CHECK(r.measured_peak_reserved == 20971520);
  CHECK(r.max_reserved_gap == 0);
  std::filesystem::remove_all(dir);
}
