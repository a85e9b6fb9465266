// What our runtime's step runs of a scenario (runtime/step_plan.hpp): the shapes of a real model, the
// logits shards from the step model's rule, and one InputError line naming the key for what it does not run.
#include <catch2/catch.hpp>

#include <string>

#include "core/errors.hpp"
#include "runtime/step_plan.hpp"
#include "tests/sim/fixtures.hpp"

using namespace ulysses;

namespace {
Scenario llama(std::int64_t S) {
  Scenario sc;
  sc.name = "t";
  sc.model = test::llama31_8b();
  sc.model.layers = 2;
  sc.hw = test::h200_sxm();
  sc.plan.seq_len = S;
  sc.plan.zero_stage = 3;
  return sc;
}
std::string refusal(const Scenario& sc) {
  try {
    runtime::step_shape_of(sc, "s.yaml");
  } catch (const core::InputError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("step plan: llama-3.1-8b's shapes and the logits shards", "[runtime][step_plan]") {
  Scenario sc = llama(32768);
  runtime::StepShape s = runtime::step_shape_of(sc, "s.yaml");
  CHECK(s.dims.layer.T == 32768);
  CHECK(s.dims.layer.h == 4096);
  CHECK(s.dims.layer.H == 32);
  CHECK(s.dims.layer.H_kv == 8);
  CHECK(s.dims.layer.F == 14336);
  CHECK(s.dims.V == 128256);
  CHECK(s.dims.L == 2);
  CHECK_FALSE(s.dims.tied);
  CHECK(s.checkpoint);
  CHECK(s.logits_shards == 1);
  CHECK(s.dims.layer.eps == 1e-5);     // the fixture gives neither: Llama 3.x's values
  CHECK(s.rope_theta == 500000.0);
  sc.model.rms_norm_eps = 1e-6, sc.model.rope_theta = 1e6;
  CHECK(runtime::step_shape_of(sc, "s.yaml").dims.layer.eps == 1e-6);
  CHECK(runtime::step_shape_of(sc, "s.yaml").rope_theta == 1e6);
  sc.model.rms_norm_eps = 0, sc.model.rope_theta = 0;  // not given: Llama 3.x's values
  CHECK(runtime::step_shape_of(sc, "s.yaml").dims.layer.eps == 1e-5);
  sc.model.qk_norm = true;                              // not given, qk_norm: Qwen3's
  CHECK(runtime::step_shape_of(sc, "s.yaml").dims.layer.eps == 1e-6);
  CHECK(runtime::step_shape_of(sc, "s.yaml").rope_theta == 1e6);
  sc.model.qk_norm = false;
  sc.plan.tiled_logits = true;  // fp32 logits 32768 * 128256 * 4 = 15.7 GiB in tiles of <= 1 GiB
  CHECK(runtime::step_shape_of(sc, "s.yaml").logits_shards == 16);
  sc.model.qk_norm = true;  // Qwen3's head norms run in the step's layer
  CHECK(runtime::step_shape_of(sc, "s.yaml").dims.layer.qk_norm);
  CHECK(runtime::step_shape_of(sc, "s.yaml").dims.layer.mlp_shards == 1);
  sc.plan.tiled_mlp = true;  // TiledMLP: ceil(S_l / h) shards = 32768 / 4096
  CHECK(runtime::step_shape_of(sc, "s.yaml").dims.layer.mlp_shards == 8);
  sc.plan.offload_checkpoints = true;
  CHECK(runtime::step_shape_of(sc, "s.yaml").offload_checkpoints);
  sc.plan.offload_optimizer = true;  // AdamW on the host
  CHECK(runtime::step_shape_of(sc, "s.yaml").offload_optimizer);
  sc.plan.offload_params = true;  // ... with the parameters there too (ZeRO-3 over one rank)
  CHECK(runtime::step_shape_of(sc, "s.yaml").offload_params);
}

TEST_CASE("step plan: sp 2 and 4 split the sequence and keep the model's shapes", "[runtime][step_plan]") {
  Scenario sc = llama(32768);
  sc.plan.sp_size = 2, sc.gpus = 2;
  runtime::StepShape s = runtime::step_shape_of(sc, "s.yaml");
  CHECK(s.sp == 2);
  CHECK(s.dims.layer.T == 16384);  // one rank's tokens
  CHECK(s.dims.layer.H == 32);     // the model's heads: the runner splits them after the exchange
  CHECK(s.dims.layer.H_kv == 8);
  sc.plan.sp_size = 16, sc.gpus = 16;  // kv heads 8 < 16: replicated
  s = runtime::step_shape_of(sc, "s.yaml");
  CHECK(s.sp == 16);
  CHECK(s.dims.layer.T == 2048);
  CHECK(runtime::step_shape_of(llama(32768), "s.yaml").sp == 1);
  sc.plan.offload_optimizer = true;  // the host optimizer over each rank's ZeRO-3 parts
  CHECK(runtime::step_shape_of(sc, "s.yaml").offload_optimizer);
  sc.plan.offload_params = true;  // ... and the parameter parts in its pinned staging
  CHECK(runtime::step_shape_of(sc, "s.yaml").offload_params);
}

TEST_CASE("step plan: what the step does not run yet is one line naming the key", "[runtime][step_plan]") {
  const Scenario base = llama(16384);
  CHECK(refusal(base).empty());
  struct Case {
    const char* key;
    void (*set)(Scenario&);
  };
  const Case cases[] = {
      {"gpus", [](Scenario& s) { s.plan.sp_size = 2; }},
      {"plan.dp_shard_size", [](Scenario& s) { s.plan.dp_shard_size = 2, s.gpus = 2; }},
      {"plan.zero_stage", [](Scenario& s) { s.plan.sp_size = 2, s.gpus = 2, s.plan.zero_stage = 2; }},
      {"plan.seq_len", [](Scenario& s) { s.plan.sp_size = 2, s.gpus = 2, s.plan.seq_len = 16385; }},
      {"plan.sp_size", [](Scenario& s) { s.plan.sp_size = 3, s.gpus = 3, s.plan.seq_len = 16383; }},
      {"model.hidden", [](Scenario& s) { s.plan.sp_size = 8, s.gpus = 8, s.model.hidden = 4064; }},  // 4064 % 64 != 0
      {"plan.offload_checkpoints", [](Scenario& s) { s.plan.offload_checkpoints = true, s.plan.activation_checkpointing = false; }},
      {"model.hidden", [](Scenario& s) { s.plan.tiled_mlp = true, s.model.hidden = 4000; }},  // rows of 8000 bytes
      {"plan.offload_params", [](Scenario& s) { s.plan.offload_params = true; }},  // sp 1, GPU AdamW
      {"plan.offload_params", [](Scenario& s) { s.plan.sp_size = 2, s.gpus = 2, s.plan.offload_params = true; }},  // GPU AdamW
      {"plan.micro_batch_size", [](Scenario& s) { s.plan.micro_batch_size = 2; }},
      {"model.qkv_bias", [](Scenario& s) { s.model.qkv_bias = true; }},
      {"model.head_dim", [](Scenario& s) { s.model.head_dim = 96, s.model.heads = 32, s.model.kv_heads = 8; }},
      {"plan.attn_implementation", [](Scenario& s) { s.plan.attn_implementation = "xformers"; }},
  };
  for (const Case& c : cases) {
    Scenario sc = base;
    c.set(sc);
    const std::string why = refusal(sc);
    INFO(c.key << ": " << why);
    CHECK(why.find(c.key) != std::string::npos);
    CHECK(why.find("s.yaml") != std::string::npos);
    CHECK(why.find('\n') == std::string::npos);
  }
}
