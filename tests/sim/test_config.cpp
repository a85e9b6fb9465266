// YAML inputs: every bad-input class gives one InputError naming file, key and rule; presets inline and by path;
// set_key, check/validate (round trips, calibrated sections, profile files, sweep specs: test_config_roundtrip.cpp;
// writing calibrated sections: tests/calib).
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "sim/config.hpp"
#include "core/errors.hpp"
#include "tests/sim/config_test_files.hpp"

namespace fs = std::filesystem;
using namespace ulysses;
using namespace ulysses::test_config;

TEST_CASE("a minimal scenario loads with documented defaults", "[config]") {
  const Scenario sc = valid_scenario();
  CHECK(sc.name == "valid");  // the file stem
  CHECK(sc.model.name == "llama-3.1-8b");
  CHECK(sc.hw.name == "h100-sxm-80gb");
  CHECK(sc.gpus == 8);
  CHECK(sc.plan.sp_size == 8);
  CHECK(sc.plan.dp_replicate_size == 1);
  CHECK(sc.plan.dp_shard_auto);
  CHECK(sc.plan.dp_shard_size == 1);  // auto: 8 / (8 * 1)
  CHECK(sc.plan.zero_stage == 3);
  CHECK(sc.plan.activation_checkpointing);
  CHECK_FALSE(sc.plan.offload_optimizer);
  CHECK(sc.plan.attn_implementation == "flash_attention_2");
  CHECK(sc.plan.kv_strategy == KvStrategy::replicate);
  CHECK(sc.plan.reduce_bucket_size == 5e8);
  CHECK(sc.workload.causal);
  CHECK(sc.gpus_per_node == 0);
  CHECK(sc.host_ram_bytes == 0);
  CHECK(check(sc).empty());
}

TEST_CASE("dp_shard_size auto takes the GPUs sp and dp_replicate leave", "[config]") {
  Scenario sc = load_scenario(write(temp_dir() / "s.yaml", replace(kValid, "gpus: 8", "gpus: 32")));
  CHECK(sc.plan.dp_shard_size == 4);  // 32 / (8 * 1)
  set_key(sc, "gpus", "64", "--gpus");
  CHECK(sc.plan.dp_shard_size == 8);
  set_key(sc, "plan.sp_size", "4", "--sp-size");
  CHECK(sc.plan.dp_shard_size == 16);
  set_key(sc, "plan.dp_shard_size", "2", "--dp-shard-size");  // explicit: no longer follows
  set_key(sc, "gpus", "16", "--gpus");
  CHECK(sc.plan.dp_shard_size == 2);
  CHECK(check(sc) == "gpus: must equal dp_replicate_size * dp_shard_size * sp_size");
  set_key(sc, "plan.dp_shard_size", "auto", "--dp-shard-size");
  CHECK(sc.plan.dp_shard_size == 4);
  CHECK(check(sc).empty());
  set_key(sc, "gpus", "6", "--gpus");  // 6 GPUs cannot hold sp 4
  CHECK(check(sc) == "plan.dp_shard_size: auto needs gpus to be a multiple of sp_size * dp_replicate_size");
}

TEST_CASE("error: file not found", "[config]") {
  const std::string missing = (temp_dir() / "nope.yaml").string();
  REQUIRE_THROWS_AS(load_scenario(missing), core::InputError);
  try {
    load_scenario(missing);
  } catch (const core::InputError& e) {
    CHECK(e.file() == missing);
    CHECK(e.key() == "file");
    CHECK(std::string(e.what()).find("cannot be read") != std::string::npos);
  }
  // a model path referenced from a scenario: named relative to the scenario
  CHECK(scenario_error(replace(kValid, "llama-3.1-8b", "models/missing.yaml")).rfind(
            "x.yaml: model: model file not found: models/missing.yaml", 0) == 0);
}

TEST_CASE("error: YAML syntax error names the line", "[config]") {
  const std::string msg = scenario_error("model: llama-3.1-8b\nplan: [1,\n  sp_size: 8\n");
  CHECK(msg.rfind("x.yaml: line ", 0) == 0);
  CHECK(msg.find("YAML syntax error") != std::string::npos);
  CHECK(scenario_error("gpus: 8\nplan:\n  sp_size: 8\n   seq_len: 4\n").find("line 4") != std::string::npos);
}

TEST_CASE("error: unknown key suggests the closest known key", "[config]") {
  CHECK(scenario_error(replace(kValid, "sp_size", "sp_sise")) ==
        "x.yaml: plan.sp_sise: unknown key (did you mean 'sp_size'?)");
  CHECK(scenario_error(kValid + "gpu_per_node: 8\n") ==
        "x.yaml: gpu_per_node: unknown key (did you mean 'gpus_per_node'?)");
  CHECK(scenario_error(kValid + "workload:\n  casual: true\n") ==
        "x.yaml: workload.casual: unknown key (did you mean 'causal'?)");
  const std::string far = scenario_error(kValid + "zzzzzzzzzz: 1\n");
  CHECK(far.rfind("x.yaml: zzzzzzzzzz: unknown key (known keys here: name, model, profile", 0) == 0);
  CHECK(scenario_error(kValid + "gpus: 8\n").rfind("x.yaml: gpus: duplicate key (line 7)", 0) == 0);
}

TEST_CASE("error: missing required key", "[config]") {
  CHECK(scenario_error(replace(kValid, "gpus: 8\n", "")) == "x.yaml: gpus: missing required key");
  CHECK(scenario_error(replace(kValid, "  seq_len: 65536\n", "")) == "x.yaml: plan.seq_len: missing required key");
  CHECK(scenario_error(replace(kValid, "  sp_size: 8\n", "")) == "x.yaml: plan.sp_size: missing required key");
  CHECK(scenario_error(replace(kValid, "model: llama-3.1-8b\n", "")) == "x.yaml: model: missing required key");
  CHECK(scenario_error(replace(kValid, "profile: h100-sxm-80gb\n", "")) == "x.yaml: profile: missing required key");
  CHECK(scenario_error(replace(kValid, "model: llama-3.1-8b", "model: {layers: 2, hidden: 64}")) ==
        "x.yaml: model.heads: missing required key");
  CHECK(scenario_error("") == "x.yaml: file: must be a map of keys (got nothing)");
}

TEST_CASE("error: wrong types", "[config]") {
  CHECK(scenario_error(replace(kValid, "gpus: 8", "gpus: eight")) == "x.yaml: gpus: must be a positive integer (got eight)");
  CHECK(scenario_error(replace(kValid, "gpus: 8", "gpus: \"8\"")) ==
        "x.yaml: gpus: must be a positive integer (got the string \"8\")");
  CHECK(scenario_error(replace(kValid, "gpus: 8", "gpus: 8.5")) == "x.yaml: gpus: must be a positive integer (got 8.5)");
  CHECK(scenario_error(kValid + "  tiled_mlp: 1\n") == "x.yaml: plan.tiled_mlp: must be true or false (got 1)");
  CHECK(scenario_error(kValid + "  tiled_mlp: yes\n") == "x.yaml: plan.tiled_mlp: must be true or false (got yes)");
  CHECK(scenario_error(kValid + "  seq_len: [1, 2]\n").rfind("x.yaml: plan.seq_len: duplicate key", 0) == 0);
  CHECK(scenario_error(replace(kValid, "seq_len: 65536", "seq_len: [1, 2]")) ==
        "x.yaml: plan.seq_len: must be a scalar (got a list)");
  CHECK(scenario_error(replace(kValid, "gpus: 8", "gpus:")) == "x.yaml: gpus: must be a scalar (got nothing)");
  CHECK(scenario_error(kValid + "workload: true\n") == "x.yaml: workload: must be a map of keys (got a scalar)");
  CHECK(scenario_error(kValid + "host_mem_GiB: lots\n") == "x.yaml: host_mem_GiB: must be a positive number of GiB, at most 2^30 (got lots)");
  CHECK(scenario_error(kValid + "  reduce_bucket_size: .inf\n") ==
        "x.yaml: plan.reduce_bucket_size: must be a positive number (got .inf)");
}

TEST_CASE("error: negative or zero sizes", "[config]") {
  CHECK(scenario_error(replace(kValid, "sp_size: 8", "sp_size: -2")) ==
        "x.yaml: plan.sp_size: must be a positive integer (got -2)");
  CHECK(scenario_error(replace(kValid, "gpus: 8", "gpus: 0")) == "x.yaml: gpus: must be a positive integer (got 0)");
  const std::string zero_len = scenario_error(replace(kValid, "seq_len: 65536", "seq_len: 0"));  // parse_tokens
  CHECK(zero_len.rfind("x.yaml: plan.seq_len: must be a token count (", 0) == 0);
  CHECK(zero_len.find("; at least 1 (got '0')") == zero_len.size() - std::string("; at least 1 (got '0')").size());
  CHECK(scenario_error(kValid + "  micro_batch_size: -1\n") ==
        "x.yaml: plan.micro_batch_size: must be a positive integer (got -1)");
  CHECK(scenario_error(kValid + "  pad_to_multiple_of: -8\n") ==
        "x.yaml: plan.pad_to_multiple_of: must be a non-negative integer (got -8)");
  CHECK(scenario_error(replace(kValid, "model: llama-3.1-8b", "model: {base: llama-3.1-8b, layers: 0}")) ==
        "x.yaml: model.layers: must be a positive integer (got 0)");
}

TEST_CASE("error: dp_replicate_size * dp_shard_size * sp_size != gpus", "[config]") {
  CHECK(scenario_error(kValid + "  dp_shard_size: 2\n") ==
        "x.yaml: gpus: must equal dp_replicate_size * dp_shard_size * sp_size (gpus 8, 1 * 2 * 8 = 16)");
  CHECK(scenario_error(kValid + "  dp_replicate_size: 3\n") ==
        "x.yaml: plan.dp_shard_size: auto needs gpus to be a multiple of sp_size * dp_replicate_size "
        "(gpus 8, sp_size 8, dp_replicate_size 3)");
}

TEST_CASE("error: Ulysses head rules", "[config]") {
  // 32 query heads do not split over 64 ranks
  const std::string sp64 = replace(replace(kValid, "sp_size: 8", "sp_size: 64"), "gpus: 8", "gpus: 64");
  CHECK(scenario_error(sp64) == "x.yaml: plan.sp_size: model.heads must be divisible by sp_size (heads 32, sp_size 64)");
  // 48 heads, 12 kv heads, sp 8: 48 % 8 == 0 but 12 and 8 neither divide the other
  const std::string kv12 = replace(kValid, "model: llama-3.1-8b", "model: {base: llama-3.1-8b, heads: 48, kv_heads: 12}");
  CHECK(scenario_error(kv12) ==
        "x.yaml: plan.sp_size: model.kv_heads must divide or be divisible by sp_size (kv_heads 12, sp_size 8)");
  // kv heads < sp (replicated) and kv heads > sp (split) are both fine
  CHECK(scenario_error(replace(replace(kValid, "sp_size: 8", "sp_size: 16"), "gpus: 8", "gpus: 16")).empty());
  CHECK(scenario_error(replace(replace(kValid, "sp_size: 8", "sp_size: 4"), "gpus: 8", "gpus: 4")).empty());
  // kv heads must divide heads (GQA)
  CHECK(scenario_error(replace(kValid, "model: llama-3.1-8b", "model: {base: llama-3.1-8b, kv_heads: 5}")) ==
        "x.yaml: model.kv_heads: must divide heads (heads 32, kv_heads 5)");
}

TEST_CASE("error: seq_len not divisible by sp_size without padding", "[config]") {
  const std::string odd = replace(kValid, "seq_len: 65536", "seq_len: 65537");
  CHECK(scenario_error(odd) ==
        "x.yaml: plan.seq_len: must be divisible by sp_size (or set plan.pad_to_multiple_of) (seq_len 65537, sp_size 8)");
  CHECK(scenario_error(odd + "  pad_to_multiple_of: 64\n").empty());
}

TEST_CASE("error: zero_stage range and offload dependencies", "[config]") {
  CHECK(scenario_error(kValid + "  zero_stage: 4\n") == "x.yaml: plan.zero_stage: must be 0, 1, 2 or 3 (got 4)");
  CHECK(scenario_error(kValid + "  zero_stage: -1\n") == "x.yaml: plan.zero_stage: must be 0, 1, 2 or 3 (got -1)");
  CHECK(scenario_error(kValid + "  zero_stage: 2\n  offload_params: true\n") ==
        "x.yaml: plan.offload_params: needs zero_stage 3 (zero_stage 2)");
  CHECK(scenario_error(kValid + "  zero_stage: 0\n  offload_optimizer: true\n") ==
        "x.yaml: plan.offload_optimizer: needs zero_stage 1, 2 or 3 (zero_stage 0)");
  CHECK(scenario_error(kValid + "  activation_checkpointing: false\n  offload_checkpoints: true\n") ==
        "x.yaml: plan.offload_checkpoints: needs activation_checkpointing (activation_checkpointing false)");
}

TEST_CASE("error: unknown presets list the available ones", "[config]") {
  const std::string m = scenario_error(replace(kValid, "llama-3.1-8b", "llama-3-8b"));
  CHECK(m.rfind("x.yaml: model: unknown model preset 'llama-3-8b', did you mean 'llama-3.1-8b'? (available: ", 0) == 0);
  CHECK(m.find("qwen3-32b") != std::string::npos);
  const std::string p = scenario_error(replace(kValid, "h100-sxm-80gb", "b200"));
  CHECK(p.rfind("x.yaml: profile: unknown profile preset 'b200' (available: ", 0) == 0);
  CHECK(p.find("h200-sxm-141gb") != std::string::npos);
  CHECK_THROWS_WITH(load_model("gpt-5"), Catch::StartsWith("command line: model: unknown model preset 'gpt-5'"));
}

TEST_CASE("error: unknown attn_implementation and kv_strategy values", "[config]") {
  CHECK(scenario_error(kValid + "  attn_implementation: flash3\n").rfind(
            "x.yaml: plan.attn_implementation: must be one of flash_attention_2, flash_attention_3, sdpa", 0) == 0);
  CHECK(scenario_error(kValid + "  kv_strategy: broadcast\n") ==
        "x.yaml: plan.kv_strategy: must be one of replicate, send_once (got 'broadcast')");
}

TEST_CASE("inline model and profile maps, with or without a base preset", "[config]") {
  const std::string tiny = replace(replace(kValid, "model: llama-3.1-8b",
                                           "model:\n  name: tiny\n  layers: 2\n  hidden: 256\n  heads: 8\n"
                                           "  kv_heads: 2\n  ffn_hidden: 512\n  vocab: 1000\n"),
                                   "profile: h100-sxm-80gb", "profile: {base: h200-sxm-141gb, nic_GBps: 25}");
  const Scenario sc = load_scenario(write(temp_dir() / "tiny.yaml", tiny));
  CHECK(sc.model.name == "tiny");
  CHECK(sc.model.head_dim == 32);  // default hidden / heads
  CHECK_FALSE(sc.model.tied_embeddings);
  CHECK(sc.hw.name == "h200-sxm-141gb");
  CHECK(sc.hw.nic_GBps == 25);
  CHECK(sc.hw.nvlink_GBps == 450);  // kept from the base
  // a full inline profile needs every figure
  CHECK(scenario_error(replace(kValid, "profile: h100-sxm-80gb", "profile: {gpu: x, hbm_GiB: 80}")) ==
        "x.yaml: profile.bf16_dense_TFLOPs: missing required key");
  CHECK(scenario_error(replace(kValid, "profile: h100-sxm-80gb", "profile: {base: h100-sxm-80gb, gemm_eff: 1.2}")) ==
        "x.yaml: profile.gemm_eff: must be a fraction of peak in (0, 1] (got 1.2)");
}

TEST_CASE("model and profile files given by path resolve next to the scenario", "[config]") {
  const fs::path d = temp_dir();
  fs::create_directories(d / "models");
  write(d / "models" / "m.yaml", "layers: 2\nhidden: 128\nheads: 4\nkv_heads: 4\nffn_hidden: 256\nvocab: 100\n");
  const std::string path = write(d / "s.yaml", replace(replace(kValid, "llama-3.1-8b", "models/m.yaml"),
                                                       "sp_size: 8", "sp_size: 4"));
  const std::string text = read(path);
  const Scenario sc = load_scenario(write(d / "s.yaml", replace(text, "gpus: 8", "gpus: 4")));
  CHECK(sc.model.name == "m");
  CHECK(sc.model.layers == 2);
  // errors inside the referenced file name that file
  write(d / "models" / "m.yaml", "layers: 2\nhidden: 128\nheads: 4\nkv_heads: 4\nffn_hidden: 256\nvocab: -100\n");
  CHECK_THROWS_WITH(load_scenario(path), Catch::Contains("models/m.yaml: vocab: must be a positive integer (got -100)"));
}

TEST_CASE("set_key sets every kind of key and rejects bad ones", "[config]") {
  Scenario sc = valid_scenario();
  set_key(sc, "plan.seq_len", "131072", "--seq-len");
  set_key(sc, "plan.tiled_mlp", "true", "--tiled-mlp");
  set_key(sc, "plan.attn_implementation", "sdpa", "--attn-implementation");
  set_key(sc, "plan.kv_strategy", "send_once", "--kv-strategy");
  set_key(sc, "plan.reduce_bucket_size", "2e8", "x.yaml");
  set_key(sc, "workload.causal", "false", "x.yaml");
  set_key(sc, "host_mem_GiB", "512", "--host-mem-GiB");
  set_key(sc, "gpus_per_node", "4", "--gpus-per-node");
  set_key(sc, "name", "cli", "--name");
  CHECK(sc.plan.seq_len == 131072);
  CHECK(sc.plan.tiled_mlp);
  CHECK(sc.plan.attn_implementation == "sdpa");
  CHECK(sc.plan.kv_strategy == KvStrategy::send_once);
  CHECK(sc.plan.reduce_bucket_size == 2e8);
  CHECK_FALSE(sc.workload.causal);
  CHECK(sc.host_ram_bytes == 512LL << 30);
  CHECK(sc.gpus_per_node == 4);
  CHECK(sc.name == "cli");

  set_key(sc, "model.layers", "4", "--model-layers");
  CHECK(sc.model.layers == 4);
  set_key(sc, "model", "qwen3-32b", "--model");  // a preset name reloads the whole model
  CHECK(sc.model.layers == 64);
  CHECK(sc.model.qk_norm);
  set_key(sc, "model", "{base: qwen3-4b, layers: 2}", "--model");
  CHECK(sc.model.hidden == 2560);
  CHECK(sc.model.layers == 2);
  set_key(sc, "profile", "a100-sxm-80gb", "--profile");
  CHECK(sc.hw.bf16_dense_flops == 312e12);
  set_key(sc, "profile.nic_GBps", "100", "--nic");
  set_key(sc, "profile.a2a_alpha_us", "10", "--alpha");
  set_key(sc, "profile.hbm_GiB", "40", "--hbm");
  CHECK(sc.hw.nic_GBps == 100);
  CHECK(sc.hw.a2a_alpha_s == Approx(10e-6));
  CHECK(sc.hw.hbm_bytes == 40LL << 30);

  CHECK_THROWS_WITH(set_key(sc, "plan.sp_size", "-2", "--sp-size"),
                    "command line: --sp-size: must be a positive integer (got -2)");
  CHECK_THROWS_WITH(set_key(sc, "plan.sp_size", "-2", "sweep.yaml"),
                    "sweep.yaml: plan.sp_size: must be a positive integer (got -2)");
  CHECK_THROWS_WITH(set_key(sc, "plan.sp_sise", "2", "sweep.yaml"),
                    "sweep.yaml: plan.sp_sise: unknown key (did you mean 'plan.sp_size'?)");
  CHECK_THROWS_WITH(set_key(sc, "model.head", "2", "--x"), "command line: --x: unknown key (did you mean 'model.heads'?)");
  CHECK_THROWS_WITH(set_key(sc, "plan.offload_params", "on", "--offload-params"),
                    "command line: --offload-params: must be true or false (got on)");
  CHECK_THROWS_AS(set_key(sc, "model", "nonexistent-model", "--model"), core::InputError);
  // every advertised key is wired to a typed setter: a bad value is a value error, not "unknown key"
  const std::vector<std::string> text_keys = {"name", "model.name", "model.source", "profile.name", "profile.gpu"};
  for (const std::string& key : settable_keys()) {
    if (std::find(text_keys.begin(), text_keys.end(), key) != text_keys.end()) continue;
    Scenario s = valid_scenario();
    INFO(key);
    try {
      set_key(s, key, "-1.5x", "--x");
      FAIL("accepted -1.5x");
    } catch (const core::InputError& e) {
      CHECK(e.rule().find("unknown key") == std::string::npos);
    }
  }
}

TEST_CASE("check returns a stable rule per violation, validate throws it with values", "[config]") {
  Scenario sc = valid_scenario();
  CHECK(check(sc).empty());
  CHECK_NOTHROW(validate(sc, "x.yaml"));
  sc.plan.seq_len = 1001;
  CHECK(check(sc) == "plan.seq_len: must be divisible by sp_size (or set plan.pad_to_multiple_of)");
  sc.plan.seq_len = 1003;
  CHECK(check(sc) == "plan.seq_len: must be divisible by sp_size (or set plan.pad_to_multiple_of)");  // same bucket
  CHECK_THROWS_WITH(validate(sc, "x.yaml"), Catch::EndsWith("(seq_len 1003, sp_size 8)"));
  CHECK_THROWS_WITH(validate(sc, "--seq-len"), Catch::StartsWith("command line: plan.seq_len: "));
  sc.plan.seq_len = 1024;
  sc.plan.zero_stage = 7;  // built directly, bypassing set_key
  CHECK(check(sc) == "plan.zero_stage: must be 0, 1, 2 or 3");
  sc.plan.zero_stage = 3;
  sc.plan.attn_implementation = "magic";
  CHECK(check(sc) == "plan.attn_implementation: unknown implementation");
  sc.plan.attn_implementation = "sdpa";
  sc.hw.gemm_eff = 0;
  CHECK(check(sc) == "profile.gemm_eff: must be a fraction of peak in (0, 1]");
}
