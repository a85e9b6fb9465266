// ulysses sweep --shard K/N and sweep merge: the merged outputs equal one unsharded run.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/cli/run_cli.hpp"

using nlohmann::ordered_json;
using ulysses::test::count_lines;
using ulysses::test::run_cli;
using ulysses::test::slurp;
using ulysses::test::TempDir;

namespace {

// 3 sp sizes x 4 lengths = 12 points (sp 3 breaks the head rules: skipped), not a multiple of 5
std::string write_spec(const TempDir& dir, const std::string& lengths = "[64K, 128Ki, 1M, 2000000]") {
  const std::string path = dir / "shardy.yaml";
  std::ofstream(path) << "name: shardy\n"
                      << "base: " << ulysses::test::source_path("scenarios/llama8b-h100-sp8.yaml") << "\n"
                      << "axes:\n"
                      << "  plan.sp_size: [1, 3, 8]\n"
                      << "  plan.seq_len: " << lengths << "\n"
                      << "mode: predict\n";
  return path;
}

// The summary without the keys that time the run.
ordered_json untimed(const std::string& path) {
  ordered_json j = ordered_json::parse(slurp(path));
  for (const char* k : {"elapsed_s", "points_per_s", "threads"}) j.erase(k);
  return j;
}

}  // namespace

TEST_CASE("sweep --shard K/N, then merge: the CSV byte for byte, the summary but for its timing", "[cli][sweep]") {
  TempDir dir;
  const std::string spec = write_spec(dir);
  const auto whole = run_cli("sweep '" + spec + "' --out '" + (dir / "whole") + "' --threads 2");
  INFO(whole.err);
  REQUIRE(whole.rc == 0);
  auto expect = untimed(dir / "whole/shardy.summary.json");
  expect.erase("csv");  // names its folder
  for (int n : {1, 3, 5, 12, 13}) {  // 13 > 12 points: one shard is empty
    INFO(n);
    std::string dirs;
    for (int k = 1; k <= n; ++k) {
      const std::string out = dir / ("s" + std::to_string(n) + "-" + std::to_string(k % 2));  // two folders
      const auto r = run_cli("sweep '" + spec + "' --out '" + out + "' --threads 1 --shard " + std::to_string(k) + "/" +
                             std::to_string(n));
      INFO(r.err);
      REQUIRE(r.rc == 0);
      CHECK(r.out.find("shard " + std::to_string(k) + "/" + std::to_string(n)) != std::string::npos);
      if (dirs.find(out) == std::string::npos) dirs += " '" + out + "'";
    }
    const std::string merged = dir / ("m" + std::to_string(n));
    const auto m = run_cli("sweep merge" + dirs + " --out '" + merged + "'");
    INFO(m.err);
    REQUIRE(m.rc == 0);
    CHECK(m.out.find("merged " + std::to_string(n) + " shards") != std::string::npos);
    const std::string csv = slurp(merged + "/shardy.csv");
    CHECK(count_lines(csv) == 1 + 12);
    CHECK(csv == slurp(dir / "whole/shardy.csv"));
    auto got = untimed(merged + "/shardy.summary.json");
    CHECK(got["csv"] == merged + "/shardy.csv");
    got.erase("csv");
    CHECK(got.dump(2) == expect.dump(2));
  }
}

TEST_CASE("sweep merge: no shard key, counts of the whole sweep, also into the unsharded run's folder", "[cli][sweep]") {
  TempDir dir;
  const std::string spec = write_spec(dir);
  REQUIRE(run_cli("sweep '" + spec + "' --out '" + (dir / "whole") + "'").rc == 0);
  const std::string csv = slurp(dir / "whole/shardy.csv");
  const auto summary = untimed(dir / "whole/shardy.summary.json");
  for (int k = 1; k <= 3; ++k)
    REQUIRE(run_cli("sweep '" + spec + "' --out '" + (dir / "parts") + "' --shard " + std::to_string(k) + "/3").rc == 0);
  const auto m = run_cli("sweep merge '" + (dir / "parts") + "' --out '" + (dir / "whole") + "'");  // replaces
  INFO(m.err);
  REQUIRE(m.rc == 0);
  CHECK(slurp(dir / "whole/shardy.csv") == csv);
  const auto b = untimed(dir / "whole/shardy.summary.json");
  CHECK(b.dump(2) == summary.dump(2));
  CHECK(b["points"] == 12);
  CHECK(b["skipped_total"] == 4);  // sp 3 at each of the 4 lengths
  CHECK(!b.contains("shard"));
  const auto shard = ordered_json::parse(slurp(dir / "parts/shardy.shard-2-of-3.summary.json"));
  CHECK(shard["shard"]["index"] == 2);
  CHECK(shard["shard"]["count"] == 3);
  CHECK(shard["points"] == 4);
  CHECK(shard["spec_fnv1a64"] == b["spec_fnv1a64"]);
  CHECK(shard["version"] == b["version"]);
}

TEST_CASE("sweep --shard: a bad K/N is one line, exit 2", "[cli][sweep]") {
  TempDir dir;
  const std::string spec = write_spec(dir);
  for (const char* bad : {"0/3", "4/3", "1/0", "a/b", "1/", "/3", "3", "-1/3", "1/3/4", "1.5/3", "99999999/99999999"}) {
    INFO(bad);
    const auto r = run_cli("sweep '" + spec + "' --out '" + (dir / "o") + "' --shard '" + bad + "'");
    CHECK(r.rc == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.find("--shard") != std::string::npos);
  }
  CHECK(!std::filesystem::exists(dir / "o"));
}

TEST_CASE("sweep --shard auto: K/N from SLURM_PROCID/SLURM_NTASKS, else RANK/WORLD_SIZE", "[cli][sweep]") {
  TempDir dir;
  const std::string spec = write_spec(dir);
  const auto r = ulysses::test::run_cli_env("SLURM_PROCID=1 SLURM_NTASKS=3 RANK=0 WORLD_SIZE=5",
                                            "sweep '" + spec + "' --out '" + (dir / "o") + "' --shard auto");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK(std::filesystem::exists(dir / "o/shardy.shard-2-of-3.csv"));
  const auto t = ulysses::test::run_cli_env("RANK=4 WORLD_SIZE=5", "sweep '" + spec + "' --out '" + (dir / "o") + "' --shard auto");
  REQUIRE(t.rc == 0);
  CHECK(std::filesystem::exists(dir / "o/shardy.shard-5-of-5.csv"));
  const auto bad = ulysses::test::run_cli_env("RANK=5 WORLD_SIZE=5", "sweep '" + spec + "' --out '" + (dir / "o") + "' --shard auto");
  CHECK(bad.rc == 2);
  CHECK(count_lines(bad.err) == 1);
  const auto none = ulysses::test::run_cli_env("", "sweep '" + spec + "' --out '" + (dir / "o") + "' --shard auto");
  CHECK(none.rc == 2);
  CHECK(none.err.find("SLURM_PROCID") != std::string::npos);
}

TEST_CASE("sweep merge: missing, duplicate and mismatched shards are one line, exit 2", "[cli][sweep]") {
  TempDir dir;
  const std::string spec = write_spec(dir);
  for (int k = 1; k <= 3; ++k)
    REQUIRE(run_cli("sweep '" + spec + "' --out '" + (dir / "a") + "' --shard " + std::to_string(k) + "/3").rc == 0);
  auto merge = [&](const std::string& dirs) { return run_cli("sweep merge " + dirs + " --out '" + (dir / "m") + "'"); };
  auto one_line = [](const ulysses::test::CliResult& r, const std::string& what) {
    INFO(r.err);
    CHECK(r.rc == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.find(what) != std::string::npos);
  };
  // the same shards twice (the folder given twice)
  one_line(merge("'" + (dir / "a") + "' '" + (dir / "a") + "'"), "also in");
  // a shard missing
  std::filesystem::create_directories(dir / "b");
  for (const char* ext : {".csv", ".summary.json"})
    std::filesystem::copy_file(dir / (std::string("a/shardy.shard-1-of-3") + ext), dir / (std::string("b/shardy.shard-1-of-3") + ext));
  one_line(merge("'" + (dir / "b") + "'"), "missing shard(s) 2, 3 of 3");
  // another spec (other lengths): another fingerprint
  const std::string other = write_spec(dir, "[64K, 128Ki, 1M, 3000000]");
  REQUIRE(run_cli("sweep '" + other + "' --out '" + (dir / "c") + "' --shard 2/3").rc == 0);
  std::filesystem::copy_file(dir / "a/shardy.shard-3-of-3.csv", dir / "c/shardy.shard-3-of-3.csv");
  std::filesystem::copy_file(dir / "a/shardy.shard-3-of-3.summary.json", dir / "c/shardy.shard-3-of-3.summary.json");
  one_line(merge("'" + (dir / "b") + "' '" + (dir / "c") + "'"), "spec fingerprint");
  // another shard count
  REQUIRE(run_cli("sweep '" + spec + "' --out '" + (dir / "d") + "' --shard 2/4").rc == 0);
  one_line(merge("'" + (dir / "b") + "' '" + (dir / "d") + "'"), "shards");
  // another tool version
  std::filesystem::create_directories(dir / "e");
  {
    auto j = ordered_json::parse(slurp(dir / "a/shardy.shard-2-of-3.summary.json"));
    j["version"]["git"] = "0000000";
    std::ofstream(dir / "e/shardy.shard-2-of-3.summary.json") << j.dump(2) << "\n";
    std::filesystem::copy_file(dir / "a/shardy.shard-2-of-3.csv", dir / "e/shardy.shard-2-of-3.csv");
    std::filesystem::copy_file(dir / "a/shardy.shard-3-of-3.csv", dir / "e/shardy.shard-3-of-3.csv");
    std::filesystem::copy_file(dir / "a/shardy.shard-3-of-3.summary.json", dir / "e/shardy.shard-3-of-3.summary.json");
  }
  one_line(merge("'" + (dir / "b") + "' '" + (dir / "e") + "'"), "tool version");
  // a truncated CSV
  std::filesystem::create_directories(dir / "f");
  for (const char* ext : {".csv", ".summary.json"})
    std::filesystem::copy_file(dir / (std::string("a/shardy.shard-2-of-3") + ext), dir / (std::string("f/shardy.shard-2-of-3") + ext));
  std::filesystem::copy_file(dir / "a/shardy.shard-3-of-3.summary.json", dir / "f/shardy.shard-3-of-3.summary.json");
  {
    const std::string csv = slurp(dir / "a/shardy.shard-3-of-3.csv");
    std::ofstream(dir / "f/shardy.shard-3-of-3.csv") << csv.substr(0, csv.size() - 10);
  }
  one_line(merge("'" + (dir / "b") + "' '" + (dir / "f") + "'"), "rows");
  // no shards at all, and no such folder
  std::filesystem::create_directories(dir / "empty");
  one_line(merge("'" + (dir / "empty") + "'"), "no <name>.shard-K-of-N");
  one_line(merge("'" + (dir / "nope") + "'"), "no such folder");
  CHECK(!std::filesystem::exists(dir / "m/shardy.csv"));  // nothing written by a refused merge
  CHECK(!std::filesystem::exists(dir / "m/shardy.summary.json"));
}
