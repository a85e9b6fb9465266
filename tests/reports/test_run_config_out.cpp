// Run configs out (reports/run_config_out.hpp): every plan key a run config carries survives
// emit -> read (compared through to_yaml, so keys the plan JSON leaves out count too), and what
// the configs cannot express is refused naming --emit.
#include <catch2/catch.hpp>

#include "reports/run_config_out.hpp"
#include "sim/config.hpp"
#include "core/errors.hpp"
#include "tests/cli/run_cli.hpp"
#include "tests/sim/fixtures.hpp"

using namespace ulysses;
using ulysses::test::TempDir;

namespace {

Scenario base(std::int64_t gpus) {
  Scenario sc;
  sc.name = "t";
  sc.model = test::llama31_8b();
  sc.hw = test::h100_sxm();
  sc.gpus = gpus;
  sc.plan.seq_len = 65536;
  return sc;
}

}  // namespace

TEST_CASE("emit -> read gives back every plan key a run config carries", "[run_config]") {
  struct Case {
    std::int64_t gpus, sp, rep;
    int zero;
    bool off_opt, off_par, torch_adam;
    std::int64_t micro;
    double bucket;
    const char* attn;
  };
  const Case cases[] = {
      {8, 8, 1, 3, true, false, false, 1, 5e8, "sdpa"},
      {4, 1, 1, 2, false, false, true, 2, 2e8, "flash_attention_2"},
      {16, 4, 2, 3, true, true, false, 1, 16777216, "flash_attention_3"},
      {8, 8, 1, 3, false, false, true, 4, 5e8, "flash_attention_2"},
      {2, 2, 1, 1, true, false, false, 1, 1e8, "sdpa"},
  };
  for (const auto& c : cases) {
    Scenario a = base(c.gpus);
    auto& p = a.plan;
    p.sp_size = c.sp;
    p.dp_replicate_size = c.rep;
    p.dp_shard_size = c.gpus / (c.sp * c.rep);
    p.zero_stage = c.zero;
    p.offload_optimizer = c.off_opt;
    p.offload_params = c.off_par;
    p.torch_adam = c.torch_adam;
    p.micro_batch_size = c.micro;
    p.reduce_bucket_size = c.bucket;
    p.attn_implementation = c.attn;
    p.tiled_mlp = true;  // a script-side key: carried by no config, set on both sides
    TempDir d;
    const auto files = reports::emit_run_configs(d.path.string(), a);
    REQUIRE(files.size() == 2);
    Scenario b = base(1);
    b.plan.tiled_mlp = true;
    if (c.sp == 1) b.plan.attn_implementation = c.attn;  // only Accelerate's sp settings carry it
    const auto rc = apply_run_configs(b, files[0], "");
    a.gpus_per_node = resolved_gpus_per_node(a);  // the profile's, or the one num_machines gives
    b.gpus_per_node = resolved_gpus_per_node(b);
    INFO(to_yaml(a) << "\n---\n" << to_yaml(b));
    CHECK(to_yaml(a) == to_yaml(b));
    check_run_configs(rc, b);  // the emitted train_batch_size obeys DeepSpeed's rule
  }
}

TEST_CASE("emit: torch_adam with optimizer offload is written false (CPU Adam runs either way)", "[run_config]") {
  Scenario a = base(8);
  a.plan.sp_size = 8;
  a.plan.offload_optimizer = true;
  a.plan.torch_adam = true;
  const auto j = reports::deepspeed_config_json(a);
  CHECK(j["optimizer"]["params"]["torch_adam"] == false);
  CHECK(j["zero_optimization"]["offload_optimizer"]["device"] == "cpu");
  CHECK_FALSE(j["zero_optimization"].contains("offload_param"));
}

TEST_CASE("emit: what Accelerate cannot express is refused naming --emit", "[run_config]") {
  TempDir d;
  Scenario a = base(12);  // 12 GPUs on 8-GPU nodes
  a.plan.sp_size = 4;
  a.plan.dp_shard_size = 3;
  CHECK_THROWS_AS(reports::check_emittable(a, d.path.string()), core::InputError);
  Scenario b = base(8);
  b.plan.sp_size = 8;
  b.plan.attn_implementation = "ulysses_flash";
  try {
    reports::check_emittable(b, d.path.string());
    FAIL("no error");
  } catch (const core::InputError& e) {
    CHECK(e.key() == "--emit");
  }
  b.plan.attn_implementation = "sdpa";
  reports::check_emittable(b, d.path.string());
}
