// ulysses plan / predict through the built binary: the JSON contract, flags, errors.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tests/cli/run_cli.hpp"

using nlohmann::json;
using ulysses::test::count_lines;
using ulysses::test::run_cli;

namespace {

std::int64_t sum_terms(const json& m) {
  std::int64_t s = 0;
  for (auto it = m.begin(); it != m.end(); ++it)
    if (it.key() != "total") s += it.value().get<std::int64_t>();
  return s;
}

json plan_json(const std::string& flags) {
  const auto r = run_cli("plan " + flags + " --format json");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  return json::parse(r.out);
}

}  // namespace

TEST_CASE("plan JSON carries the contract keys and breakdowns that sum to their totals", "[cli]") {
  const json j = plan_json("--model llama-3.1-8b --profile h100-sxm-80gb --gpus 8 --all-features");
  for (const char* k : {"seq_len", "padded_seq_len", "binding", "gpu_memory_bytes", "host_memory_bytes_per_node",
                        "phases_s", "step_time_s", "tokens_per_s", "hw_tflops_per_gpu", "megatron_tflops_per_gpu",
                        "scenario"})
    CHECK(j.contains(k));
  CHECK((j["binding"] == "gpu_hbm" || j["binding"] == "host_ram"));
  CHECK(sum_terms(j["gpu_memory_bytes"]) == j["gpu_memory_bytes"]["total"].get<std::int64_t>());
  CHECK(sum_terms(j["host_memory_bytes_per_node"]) == j["host_memory_bytes_per_node"]["total"].get<std::int64_t>());
  CHECK(j["gpu_memory_bytes"]["total"].get<std::int64_t>() <= j["gpu_capacity_bytes"].get<std::int64_t>());
  CHECK(j["phases_s"].size() > 0);
  CHECK(j["step_time_s"].get<double>() > 0);
  // --all-features on 8 GPUs: sp auto = 8 (Llama-3.1-8B: 32 heads, 8 kv heads), dp_shard 1
  const auto& plan = j["scenario"]["plan"];
  CHECK(plan["sp_size"] == 8);
  CHECK(plan["dp_shard_size"] == 1);
  CHECK(plan["tiled_mlp"] == true);
  CHECK(plan["offload_checkpoints"] == true);
  CHECK(plan["offload_optimizer"] == true);
  // the longest sequence is a positive multiple of lcm(1024, 8) = 1024
  const auto S = j["seq_len"].get<std::int64_t>();
  CHECK(S > 0);
  CHECK(S % 1024 == 0);
  // one step further, what binds does not fit
  const auto& next = j["next_step"];
  CHECK(next["seq_len"].get<std::int64_t>() == S + j["step"].get<std::int64_t>());
  if (j["binding"] == "gpu_hbm") CHECK(next["fits_gpu"] == false);
  if (j["binding"] == "host_ram") CHECK(next["fits_host"] == false);
}

TEST_CASE("plan's length fits and one step more does not (checked with predict)", "[cli]") {
  const std::string flags = "--model llama-3.1-8b --profile h100-sxm-80gb --gpus 8 --sp-size 8 --tiled-logits --tiled-mlp";
  const json p = plan_json(flags + " --granularity 2048");
  const auto S = p["seq_len"].get<std::int64_t>();
  REQUIRE(S > 0);
  CHECK(S % 2048 == 0);
  CHECK(p["step"] == 2048);
  const auto at = run_cli("predict " + flags + " --seq-len " + std::to_string(S) + " --format json");
  REQUIRE(at.rc == 0);
  CHECK(json::parse(at.out)["binding"] == "none");
  const auto over = run_cli("predict " + flags + " --seq-len " + std::to_string(S + 2048) + " --format json");
  REQUIRE(over.rc == 0);
  CHECK(json::parse(over.out)["binding"] == p["binding"]);
}

TEST_CASE("GPUs not taken by sp and dp_replicate form dp_shard", "[cli]") {
  const json j = plan_json("--model llama-3.1-8b --gpus 16 --sp-size 4 --dp-replicate-size 2");
  CHECK(j["scenario"]["plan"]["dp_shard_size"] == 2);
  CHECK(j["scenario"]["gpus"] == 16);
}

TEST_CASE("plan with --scenario and flags overriding it", "[cli]") {
  const std::string sc = ulysses::test::source_path("scenarios/llama8b-h100-sp8.yaml");
  const json base = plan_json("--scenario '" + sc + "'");
  const json more = plan_json("--scenario '" + sc + "' --gpus 16 --sp-size 16");
  CHECK(base["scenario"]["plan"]["sp_size"] == 8);
  CHECK(more["scenario"]["plan"]["sp_size"] == 16);
  CHECK(more["scenario"]["gpus"] == 16);
  // more sp ranks: less sequence per GPU, so at least as long a sequence fits
  CHECK(more["seq_len"].get<std::int64_t>() >= base["seq_len"].get<std::int64_t>());
}

TEST_CASE("predict at a given length echoes it and reports phases", "[cli]") {
  const auto r = run_cli("predict --model llama-3.1-8b --gpus 8 --sp-size 8 --seq-len 131072 --format json");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const json j = json::parse(r.out);
  CHECK(j["seq_len"] == 131072);
  CHECK(j["scenario"]["plan"]["seq_len"] == 131072);
  CHECK(j["s_local"] == 131072 / 8);
  CHECK(j["phases_s"].contains("attn.fwd"));
  CHECK(j["phases_s"].contains("a2a.qkv.fwd"));
  CHECK(sum_terms(j["gpu_memory_bytes"]) == j["gpu_memory_bytes"]["total"].get<std::int64_t>());
}

TEST_CASE("csv and table formats", "[cli]") {
  const auto csv = run_cli("predict --model llama-3.1-8b --gpus 8 --sp-size 8 --seq-len 65536 --format csv");
  REQUIRE(csv.rc == 0);
  REQUIRE(count_lines(csv.out) == 2);
  const auto nl = csv.out.find('\n');
  const std::string header = csv.out.substr(0, nl), row = csv.out.substr(nl + 1);
  CHECK(std::count(header.begin(), header.end(), ',') == std::count(row.begin(), row.end(), ','));
  CHECK(header.find("gpu_memory_bytes.total") != std::string::npos);

  const auto table = run_cli("plan --model llama-3.1-8b --gpus 8 --all-features");
  REQUIRE(table.rc == 0);
  CHECK(table.out.find("longest sequence:") != std::string::npos);
  CHECK(table.out.find("(GiB)") != std::string::npos);
  CHECK(table.out.find("Megatron-style") != std::string::npos);
}

TEST_CASE("bad flags and values: exit 2 with one line naming the flag", "[cli]") {
  struct Case {
    std::string args, names;
  };
  const Case cases[] = {
      {"plan --model llama-3.1-8b --zero-stage 7", "--zero-stage"},
      {"plan --model llama-3.1-8b --gpus -4", "--gpus"},
      {"plan --model llama-3.1-8b --gpus 6 --sp-size 4", "--gpus"},
      {"plan --model llama-3.1-8b --gpus 64 --sp-size 64", "--sp-size"},
      {"plan --model llama-3.1-8b --tiled-mlp=sometimes", "--tiled-mlp"},
      {"plan --model llama-3.1-8b --format xml", "--format"},
      {"plan --model llama-3.1-8b --granularity 0", "--granularity"},
      {"plan --model llama-3.1-8b --frobnicate", "--frobnicate"},
      {"plan --model no-such-model", "--model"},
      {"plan --gpus 8", "--model"},
      {"predict --model llama-3.1-8b --gpus 8", "--seq-len"},
      {"sweep", "SPEC"},
  };
  for (const auto& c : cases) {
    INFO(c.args);
    const auto r = run_cli(c.args);
    CHECK(r.rc == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.find(c.names) != std::string::npos);
    CHECK(r.out.empty());
  }
}

TEST_CASE("help on each command exits 0", "[cli]") {
  for (const char* cmd : {"plan", "predict", "sweep", "report"}) {
    INFO(cmd);
    const auto r = run_cli(std::string(cmd) + " --help");
    CHECK(r.rc == 0);
    CHECK(r.out.find("usage: ulysses ") != std::string::npos);
  }
}

TEST_CASE("plan: each ALST feature, added in turn, lets a longer sequence fit", "[cli]") {
  // the main job's cumulative ablations, Llama-3.1-8B on 8 H100s
  const char* steps[] = {"--sp-size 1", "--sp-size 1 --tiled-logits", "--sp-size auto --tiled-logits",
                         "--sp-size auto --tiled-logits --tiled-mlp",
                         "--sp-size auto --tiled-logits --tiled-mlp --offload-checkpoints"};
  std::int64_t previous = 0;
  for (const char* flags : steps) {
    INFO(flags);
    const json j = plan_json(std::string("--model llama-3.1-8b --profile h100-sxm-80gb --gpus 8 ") + flags);
    const auto S = j["seq_len"].get<std::int64_t>();
    CHECK(S > previous);
    previous = S;
  }
}

TEST_CASE("plan: --all-features searches the rungs, explicit flags win", "[cli]") {
  const json one = plan_json("--model llama-3.1-8b --gpus 1 --all-features");
  CHECK(one["scenario"]["plan"]["offload_params"] == true);  // the longest S on one GPU needs it
  CHECK(one["scenario"]["plan"]["sp_size"] == 1);
  const json eight =
      plan_json("--model llama-3.1-8b --gpus 8 --all-features --tiled-mlp=false --sp-size 4 --offload-params=false");
  CHECK(eight["scenario"]["plan"]["offload_params"] == false);
  CHECK(eight["scenario"]["plan"]["tiled_mlp"] == false);
  CHECK(eight["scenario"]["plan"]["sp_size"] == 4);
  CHECK(eight["scenario"]["plan"]["dp_shard_size"] == 2);
  CHECK(eight["all_features"]["searched"].size() == 3);  // tiled_logits, ckpt_offload, optimizer_offload
}
