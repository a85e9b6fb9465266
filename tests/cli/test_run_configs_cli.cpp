// plan --accelerate-config / --deepspeed-config / --emit through the built binary: the echo, the
// round trip (emit, read back: the same plan), flags over configs, and bad input (one line, exit 2).
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/cli/run_cli.hpp"

using nlohmann::json;
using ulysses::test::count_lines;
using ulysses::test::run_cli;
using ulysses::test::slurp;
using ulysses::test::source_path;
using ulysses::test::TempDir;

namespace {

json plan_json(const std::string& flags) {
  const auto r = run_cli("plan " + flags + " --format json");
  INFO("plan " << flags << "\n" << r.err);
  REQUIRE(r.rc == 0);
  return json::parse(r.out);
}

}  // namespace

TEST_CASE("emit then read back gives the same plan: same longest S, same scenario keys", "[cli][run_config]") {
  // model/profile plus the plan keys no run config carries (the training script's): on both sides
  struct Case {
    std::string common, emit_only;
  };
  const std::vector<Case> cases = {
      {"--model llama-3.1-8b --profile h100-sxm-80gb --tiled-mlp --tiled-logits --offload-checkpoints",
       "--gpus 8 --sp-size 8 --zero-stage 3 --offload-optimizer --attn-implementation sdpa"},
      {"--model llama-3.1-8b --profile h100-sxm-80gb", "--gpus 4 --sp-size 1 --zero-stage 2"},
      {"--model llama-3.1-8b --profile h200-sxm-141gb --tiled-logits",
       "--gpus 16 --sp-size 4 --dp-replicate-size 2 --zero-stage 3 --offload-optimizer --offload-params"},
      {"--model llama-3.1-8b --profile h200-sxm-141gb --tiled-mlp --tiled-logits",
       "--gpus 8 --sp-size 8 --zero-stage 3 --torch-adam --micro-batch-size 2 --attn-implementation flash_attention_2"},
      {"--model llama-3.1-8b --profile h100-sxm-80gb", "--gpus 2 --sp-size 2 --zero-stage 1 --offload-optimizer"},
  };
  for (const auto& c : cases) {
    TempDir d;
    const json a = plan_json(c.common + " " + c.emit_only + " --emit " + d.path.string());
    const json b = plan_json(c.common + " --accelerate-config " + (d / "accelerate_config.yaml"));
    INFO(c.emit_only);
    CHECK(a["seq_len"].get<std::int64_t>() > 0);
    CHECK(a["seq_len"] == b["seq_len"]);
    CHECK(a["scenario"] == b["scenario"]);
    CHECK(a["emitted"].size() == 2);
    CHECK(b["run_configs"].size() > 10);
  }
}

TEST_CASE("the echo: table block and JSON array, flags win and are marked", "[cli][run_config]") {
  const std::string yaml = source_path("tests/data/run_configs/alst-sp8.accelerate-config.yml");
  const auto t = run_cli("plan --model llama-3.1-8b --accelerate-config '" + yaml + "' --zero-stage 2");
  INFO(t.err);
  REQUIRE(t.rc == 0);
  CHECK(t.out.find("read from " + yaml + ":") != std::string::npos);
  CHECK(t.out.find("num_processes = 8 -> gpus = 8") != std::string::npos);
  CHECK(t.out.find("zero_optimization.stage = 3 -> plan.zero_stage = 3 (overridden by --zero-stage)") != std::string::npos);
  CHECK(t.out.find("zero_optimization.overlap_comm = true (not used)") != std::string::npos);
  CHECK(t.out.find("ZeRO-2") != std::string::npos);
  const json j = plan_json("--model llama-3.1-8b --accelerate-config '" + yaml + "'");
  bool found = false;
  for (const auto& e : j["run_configs"])
    if (e["key"] == "parallelism_config.parallelism_config_sp_size") {
      found = true;
      CHECK(e["target"] == "plan.sp_size");
      CHECK(e["set_to"] == "8");
    }
  CHECK(found);
  CHECK(j["scenario"]["plan"]["sp_size"] == 8);
}

TEST_CASE("predict takes the run configs too, seq_len from parallelism_config_sp_seq_length", "[cli][run_config]") {
  TempDir d;
  REQUIRE(run_cli("plan --model llama-3.1-8b --gpus 8 --sp-size 8 --emit " + d.path.string()).rc == 0);
  const auto r = run_cli("predict --model llama-3.1-8b --accelerate-config " + (d / "accelerate_config.yaml") + " --format json");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const json j = json::parse(r.out);
  CHECK(j["scenario"]["plan"]["seq_len"].get<std::int64_t>() > 0);
  CHECK(j.contains("run_configs"));
}

TEST_CASE("run configs and --emit: bad input is one line and exit 2", "[cli][run_config]") {
  TempDir d;
  const std::string good = source_path("tests/data/run_configs/alst-sp8.accelerate-config.yml");
  const std::string other = source_path("tests/data/run_configs/sp-alst.ds-config.json");
  std::ofstream(d / "file") << "x";
  std::ofstream(d / "tb.json") << R"({"bf16": {"enabled": true}, "zero_optimization": {"stage": 3}, "train_batch_size": 3})";
  const std::vector<std::string> bad = {
      "plan --model llama-3.1-8b --accelerate-config '" + good + "' --deepspeed-config '" + other + "'",
      "plan --model llama-3.1-8b --accelerate-config " + (d / "missing.yaml"),
      "plan --model llama-3.1-8b --deepspeed-config " + (d / "missing.json"),
      "plan --model llama-3.1-8b --gpus 8 --emit " + (d / "file"),
      "plan --model llama-3.1-8b --gpus 12 --sp-size 4 --emit " + (d / "out"),  // 12 GPUs on 8-GPU nodes
      "plan --model llama-3.1-8b --gpus 8 --sp-size 8 --attn-implementation ulysses_flash --emit " + (d / "out"),
      // the scenario's 8 GPUs at sp 8: DeepSpeed's batch rule wants train_batch_size 1 * 1 * (8 / 8) = 1
      "plan --scenario " + source_path("scenarios/llama8b-h100-sp8.yaml") + " --deepspeed-config " + (d / "tb.json"),
  };
  for (const auto& args : bad) {
    const auto r = run_cli(args);
    INFO(args << "\n" << r.err);
    CHECK(r.rc == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.out.empty());
  }
  CHECK_FALSE(std::filesystem::exists(d / "out"));
}
