// ulysses list, where the binary finds its presets (ULYSSES_HOME, an install's share/ulysses, a checkout), and
// plan from a Hugging Face config.json through the built binary.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "sim/config.hpp"
#include "sim/model.hpp"
#include "tests/cli/run_cli.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using ulysses::test::count_lines;
using ulysses::test::run_cli;
using ulysses::test::source_path;
using ulysses::test::TempDir;

namespace {

// Runs a copy of the binary at `bin` with ULYSSES_HOME unset (or set to `home`).
ulysses::test::CliResult run_copy(const std::string& bin, const std::string& args, const std::string& home = "") {
  TempDir tmp;
  const std::string env = home.empty() ? "env -u ULYSSES_HOME " : "env ULYSSES_HOME='" + home + "' ";
  const std::string cmd = env + "'" + bin + "' " + args + " >'" + (tmp / "out") + "' 2>'" + (tmp / "err") + "'";
  const int status = std::system(cmd.c_str());
  ulysses::test::CliResult r;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = ulysses::test::slurp(tmp / "out");
  r.err = ulysses::test::slurp(tmp / "err");
  return r;
}

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

const char* kTinyModel = "layers: 2\nhidden: 64\nheads: 4\nkv_heads: 2\nffn_hidden: 128\nvocab: 100\n";

std::string copy_binary(const fs::path& dir) {
  fs::create_directories(dir);
  const fs::path bin = dir / "ulysses";
  fs::copy_file(ULYSSES_BIN, bin, fs::copy_options::overwrite_existing);
  return bin.string();
}

// The presets a folder holds, read here from the file system (not through sim/), sorted.
std::vector<std::string> yaml_stems(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".yaml") out.push_back(e.path().stem().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("list models and profiles: every preset, table and JSON", "[cli][list]") {
  const auto models = yaml_stems(source_path("scenarios/models"));
  const auto profiles = yaml_stems(source_path("profiles"));
  REQUIRE(models.size() >= 6);
  const auto t = run_cli("list models");
  REQUIRE(t.rc == 0);
  CHECK(count_lines(t.out) == static_cast<int>(models.size()) + 2);  // a comment line, the header
  const auto j = run_cli("list models --format json");
  REQUIRE(j.rc == 0);
  const json mj = json::parse(j.out);
  REQUIRE(mj.size() == models.size());
  for (std::size_t i = 0; i < models.size(); ++i) {
    INFO(models[i]);
    CHECK(t.out.find("\n" + models[i] + " ") != std::string::npos);
    const ulysses::ModelSpec m = ulysses::load_model(models[i]);
    CHECK(mj[i]["name"] == models[i]);
    CHECK(mj[i]["layers"] == m.layers);
    CHECK(mj[i]["hidden"] == m.hidden);
    CHECK(mj[i]["heads"] == m.heads);
    CHECK(mj[i]["params"] == ulysses::total_params(m));
  }
  const auto p = run_cli("list profiles --format json");
  REQUIRE(p.rc == 0);
  const json pj = json::parse(p.out);
  REQUIRE(pj.size() == profiles.size());
  for (std::size_t i = 0; i < profiles.size(); ++i) {
    CHECK(pj[i]["name"] == profiles[i]);
    CHECK(pj[i]["hbm_GiB"].get<double>() > 0);
    CHECK(pj[i]["gpus_per_node"].get<std::int64_t>() > 0);
  }
  CHECK(run_cli("list profiles").out.find("h100-sxm-80gb") != std::string::npos);
}

TEST_CASE("list: bad arguments are one line, exit 2", "[cli][list]") {
  for (const char* args : {"", "gpus", "models --format csv", "models --format yaml", "models extra"}) {
    INFO(args);
    const auto r = run_cli(std::string("list ") + args);
    CHECK(r.rc == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.out.empty());
  }
}

TEST_CASE("presets are found next to the executable: install, checkout, ULYSSES_HOME, else one line, exit 2", "[cli][list]") {
  TempDir tmp;
  // a binary with no data anywhere near it
  const std::string lone = copy_binary(tmp.path / "lone" / "bin");
  auto r = run_copy(lone, "list models");
  CHECK(r.rc == 2);
  CHECK(count_lines(r.err) == 1);
  CHECK_THAT(r.err, Catch::Contains("ULYSSES_HOME: not set") && Catch::Contains((tmp.path / "lone" / "share" / "ulysses").string()));
  r = run_copy(lone, "plan --model llama-3.1-8b --gpus 8");
  CHECK(r.rc == 2);
  CHECK(count_lines(r.err) == 1);
  // ... but a config.json needs no presets (the default profile does: name a profile file)
  r = run_copy(lone, "plan --model " + source_path("tests/data/hf/llama-3.1-8b/config.json") + " --profile " +
                         source_path("profiles/h100-sxm-80gb.yaml") + " --gpus 8 --format json");
  CHECK(r.rc == 0);

  // an install: <prefix>/bin/ulysses with <prefix>/share/ulysses
  const std::string installed = copy_binary(tmp.path / "prefix" / "bin");
  write(tmp.path / "prefix" / "share" / "ulysses" / "scenarios" / "models" / "only-installed.yaml", kTinyModel);
  fs::create_directories(tmp.path / "prefix" / "share" / "ulysses" / "profiles");
  r = run_copy(installed, "list models --format json");
  REQUIRE(r.rc == 0);
  CHECK(json::parse(r.out).size() == 1);
  CHECK(json::parse(r.out)[0]["name"] == "only-installed");

  // a copied checkout with its build folder: its own presets, not those of the checkout it was built in
  const fs::path co = tmp.path / "checkout";
  write(co / "CMakeLists.txt", "# copy\n");
  write(co / "scenarios" / "models" / "only-copied.yaml", kTinyModel);
  fs::create_directories(co / "profiles");
  const std::string copied = copy_binary(co / "build" / "cli");
  r = run_copy(copied, "list models --format json");
  REQUIRE(r.rc == 0);
  CHECK(json::parse(r.out)[0]["name"] == "only-copied");

  // ULYSSES_HOME wins over both
  r = run_copy(installed, "list models --format json", co.string());
  REQUIRE(r.rc == 0);
  CHECK(json::parse(r.out)[0]["name"] == "only-copied");
  // the binary in its build tree: the checkout it was built from
  r = run_copy(ULYSSES_BIN, "list models --format json");
  REQUIRE(r.rc == 0);
  CHECK(json::parse(r.out).size() == yaml_stems(source_path("scenarios/models")).size());
}

TEST_CASE("plan from each preset's config.json equals plan from the preset name", "[cli][hf]") {
  for (const char* name : {"llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "qwen3-4b", "qwen3-8b", "qwen3-32b"}) {
    INFO(name);
    const std::string flags = std::string(" --profile h200-sxm-141gb --gpus ") + (std::string(name) == "llama-3.1-405b" ? "64" : "8") +
                              " --all-features --format json";
    const auto a = run_cli(std::string("plan --model ") + name + flags);
    const auto b = run_cli("plan --model " + source_path(std::string("tests/data/hf/") + name + "/config.json") + flags);
    REQUIRE(a.rc == 0);
    REQUIRE(b.rc == 0);
    const json ja = json::parse(a.out), jb = json::parse(b.out);
    CHECK(ja["seq_len"].get<std::int64_t>() > 0);
    CHECK(jb["seq_len"] == ja["seq_len"]);
    CHECK(jb["gpu_memory_bytes"] == ja["gpu_memory_bytes"]);
    CHECK(jb["step_time_s"] == ja["step_time_s"]);
    CHECK(b.err.empty());
  }
}

TEST_CASE("plan from a config.json: the sliding-window note on stderr, refusals one line exit 2", "[cli][hf]") {
  const auto g = run_cli("plan --model " + source_path("tests/data/hf/gemma-2-9b") + " --gpus 8 --all-features");
  CHECK(g.rc == 0);
  CHECK(count_lines(g.err) == 1);
  CHECK_THAT(g.err, Catch::StartsWith("ulysses: note: ") && Catch::Contains("21 of 42 layers"));
  const std::string mixtral = source_path("tests/data/hf/mixtral-8x7b-v0.1/config.json");
  const auto m = run_cli("plan --model " + mixtral + " --gpus 8");
  CHECK(m.rc == 2);
  CHECK(count_lines(m.err) == 1);
  CHECK_THAT(m.err, Catch::StartsWith("ulysses: error: " + mixtral + ": num_experts_per_tok: "));
  const auto n = run_cli("plan --model /nonexistent/config.json --gpus 8");
  CHECK(n.rc == 2);
  CHECK_THAT(n.err, Catch::Contains("--model: model file not found: /nonexistent/config.json"));
}
