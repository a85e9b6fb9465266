// YAML inputs, continued from test_config.cpp: to_yaml round trips, calibrated sections, profile files, sweep specs,
// repo_dir and set_key across threads.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "sim/config.hpp"
#include "core/errors.hpp"
#include "tests/sim/config_test_files.hpp"

namespace fs = std::filesystem;
using namespace ulysses;
using namespace ulysses::test_config;

namespace {

void require_same_curve(const Curve& a, const Curve& b) {
  REQUIRE(a.points.size() == b.points.size());
  for (std::size_t i = 0; i < a.points.size(); ++i) {
    CHECK(a.points[i].first == b.points[i].first);
    CHECK(a.points[i].second == b.points[i].second);
  }
}

void require_same(const Scenario& a, const Scenario& b) {
  CHECK(a.name == b.name);
  CHECK(a.gpus == b.gpus);
  CHECK(a.gpus_per_node == b.gpus_per_node);
  CHECK(a.host_ram_bytes == b.host_ram_bytes);
  const ModelSpec &m = a.model, &n = b.model;
  CHECK(m.name == n.name);
  CHECK(m.layers == n.layers);
  CHECK(m.hidden == n.hidden);
  CHECK(m.heads == n.heads);
  CHECK(m.kv_heads == n.kv_heads);
  CHECK(m.head_dim == n.head_dim);
  CHECK(m.ffn_hidden == n.ffn_hidden);
  CHECK(m.vocab == n.vocab);
  CHECK(m.tied_embeddings == n.tied_embeddings);
  CHECK(m.rms_norm_eps == n.rms_norm_eps);  // 0 (not given) stays 0: the writer does not freeze the fallback
  CHECK(m.rope_theta == n.rope_theta);
  CHECK(m.qk_norm == n.qk_norm);
  CHECK(m.qkv_bias == n.qkv_bias);
  CHECK(m.published_params == n.published_params);
  CHECK(m.source == n.source);
  const HardwareProfile &h = a.hw, &g = b.hw;
  CHECK(h.name == g.name);
  CHECK(h.gpu == g.gpu);
  CHECK(h.hbm_bytes == g.hbm_bytes);
  CHECK(h.bf16_dense_flops == g.bf16_dense_flops);
  CHECK(h.hbm_GBps == g.hbm_GBps);
  CHECK(h.nvlink_GBps == g.nvlink_GBps);
  CHECK(h.gpus_per_node == g.gpus_per_node);
  CHECK(h.host_ram_bytes == g.host_ram_bytes);
  CHECK(h.host_link_GBps == g.host_link_GBps);
  CHECK(h.nic_GBps == g.nic_GBps);
  CHECK(h.attn_fwd_eff == g.attn_fwd_eff);
  CHECK(h.attn_bwd_eff == g.attn_bwd_eff);
  CHECK(h.gemm_eff == g.gemm_eff);
  CHECK(h.a2a_link_eff == g.a2a_link_eff);
  CHECK(h.a2a_alpha_s == g.a2a_alpha_s);
  CHECK(h.cuda_context_bytes == g.cuda_context_bytes);
  CHECK(h.nccl_buffer_bytes == g.nccl_buffer_bytes);
  CHECK(h.sources == g.sources);
  CHECK(h.has_calibration == g.has_calibration);
  const Calibration &c = h.calibrated, &d = g.calibrated;
  CHECK(c.provenance == d.provenance);
  for (const auto& [x, y] : {std::pair{&c.allgather_busbw_GBps, &d.allgather_busbw_GBps},
                             std::pair{&c.reduce_scatter_busbw_GBps, &d.reduce_scatter_busbw_GBps}}) {
    REQUIRE(x->size() == y->size());
    for (std::size_t i = 0; i < x->size(); ++i) {
      CHECK((*x)[i].first == (*y)[i].first);
      require_same_curve((*x)[i].second, (*y)[i].second);
    }
  }
  REQUIRE(c.a2a_busbw_GBps.size() == d.a2a_busbw_GBps.size());
  for (std::size_t i = 0; i < c.a2a_busbw_GBps.size(); ++i) {
    CHECK(c.a2a_busbw_GBps[i].first == d.a2a_busbw_GBps[i].first);
    require_same_curve(c.a2a_busbw_GBps[i].second, d.a2a_busbw_GBps[i].second);
  }
  CHECK(c.a2a_alpha_s == d.a2a_alpha_s);
  for (const auto& [x, y] : {std::pair{&c.attn_fwd_eff, &d.attn_fwd_eff}, std::pair{&c.attn_bwd_eff, &d.attn_bwd_eff}}) {
    REQUIRE(x->size() == y->size());
    for (std::size_t i = 0; i < x->size(); ++i) {
      CHECK((*x)[i].first == (*y)[i].first);
      require_same_curve((*x)[i].second, (*y)[i].second);
    }
  }
  require_same_curve(c.gemm_eff, d.gemm_eff);
  CHECK(c.host_link_h2d_GBps == d.host_link_h2d_GBps);
  CHECK(c.host_link_d2h_GBps == d.host_link_d2h_GBps);
  CHECK(c.host_link_h2d_busy_GBps == d.host_link_h2d_busy_GBps);
  CHECK(c.host_link_d2h_busy_GBps == d.host_link_d2h_busy_GBps);
  CHECK(c.cuda_context_bytes == d.cuda_context_bytes);
  CHECK(c.nccl_buffer_bytes == d.nccl_buffer_bytes);
  CHECK(c.pack_GBps == d.pack_GBps);
  CHECK(c.eager_bytes_per_elem == d.eager_bytes_per_elem);  // the unmeasured ones stay -1
  CHECK(c.torch_adamw_s_per_param == d.torch_adamw_s_per_param);  // exact: written by scaled()
  CHECK(c.cpu_adam_s_per_param == d.cpu_adam_s_per_param);
  CHECK(c.zero3_torch_adamw_step_s_per_param == d.zero3_torch_adamw_step_s_per_param);
  CHECK(c.zero3_fused_adam_step_s_per_param == d.zero3_fused_adam_step_s_per_param);
  CHECK(c.zero3_offload_step_s_per_param == d.zero3_offload_step_s_per_param);
  CHECK(c.zero3_offload_grads_s_per_param == d.zero3_offload_grads_s_per_param);
  const Plan &p = a.plan, &q = b.plan;
  CHECK(p.sp_size == q.sp_size);
  CHECK(p.dp_replicate_size == q.dp_replicate_size);
  CHECK(p.dp_shard_size == q.dp_shard_size);
  CHECK(p.dp_shard_auto == q.dp_shard_auto);
  CHECK(p.zero_stage == q.zero_stage);
  CHECK(p.offload_optimizer == q.offload_optimizer);
  CHECK(p.offload_params == q.offload_params);
  CHECK(p.activation_checkpointing == q.activation_checkpointing);
  CHECK(p.offload_checkpoints == q.offload_checkpoints);
  CHECK(p.tiled_logits == q.tiled_logits);
  CHECK(p.tiled_mlp == q.tiled_mlp);
  CHECK(p.attn_implementation == q.attn_implementation);
  CHECK(p.micro_batch_size == q.micro_batch_size);
  CHECK(p.seq_len == q.seq_len);
  CHECK(p.pad_to_multiple_of == q.pad_to_multiple_of);
  CHECK(p.kv_strategy == q.kv_strategy);
  CHECK(p.reduce_bucket_size == q.reduce_bucket_size);
  CHECK(a.workload.causal == b.workload.causal);
}

Calibration sample_calibration() {
  Calibration c;
  c.provenance = "test: 2x H200, \"quoted\" text, nccl 2.28";
  c.allgather_busbw_GBps = {{2, Curve{{{1048576, 21.5}, {1073741824, 362.0}}}}};
  c.reduce_scatter_busbw_GBps = {{2, Curve{{{1048576, 18.2}, {1073741824, 351.7}}}}, {8, Curve{{{1048576, 9.9}}}}};
  c.a2a_busbw_GBps = {{2, Curve{{{1048576, 19.0}, {16777216, 159.4}, {1073741824, 331.4}}}},
                      {8, Curve{{{1048576, 12.5}, {1073741824, 360.1}}}}};
  c.a2a_alpha_s = 26.3 * 1e-6;
  c.attn_fwd_eff = {{"flash_attention_2", Curve{{{32768, 338 / 989.4}, {131072, 327 / 989.4}}}},
                    {"sdpa", Curve{{{32768, 0.6185}}}}};
  c.attn_bwd_eff = {{"flash_attention_2", Curve{{{32768, 317 / 989.4}}}}};
  c.gemm_eff = Curve{{{1e9, 0.5}, {1e12, 0.8}}};
  c.host_link_h2d_GBps = 53.1;
  c.host_link_d2h_GBps = 51.7;
  c.host_link_h2d_busy_GBps = 49.2;
  c.host_link_d2h_busy_GBps = 47.9;
  c.cuda_context_bytes = 537919488;
  c.nccl_buffer_bytes = 1LL << 30;
  c.pack_GBps = 2950;
  c.eager_bytes_per_elem[static_cast<std::size_t>(EagerRate::rmsnorm_fwd)] = 59.03;
  c.eager_bytes_per_elem[static_cast<std::size_t>(EagerRate::loss_bwd)] = 29.68;
  c.torch_adamw_s_per_param = 0.02312e-9;
  c.cpu_adam_s_per_param = 0.2634e-9;
  c.zero3_torch_adamw_step_s_per_param = 0.03924e-9;
  c.zero3_fused_adam_step_s_per_param = 0.1437e-9;
  c.zero3_offload_step_s_per_param = 0.9462e-9;
  c.zero3_offload_grads_s_per_param = 0.1572e-9;
  return c;
}

}  // namespace

TEST_CASE("to_yaml and load_scenario round trip every field", "[config]") {
  const fs::path d = temp_dir();
  Scenario sc = load_scenario(repo_dir() + "/scenarios/llama70b-h200-sp32.yaml");
  // make every field differ from its default
  set_key(sc, "name", "round \"trip\": test", "t");
  set_key(sc, "gpus", "64", "t");
  set_key(sc, "plan.dp_replicate_size", "2", "t");
  set_key(sc, "plan.dp_shard_size", "1", "t");
  set_key(sc, "gpus_per_node", "4", "t");
  set_key(sc, "host_mem_GiB", "1536.5", "t");
  set_key(sc, "plan.zero_stage", "3", "t");
  set_key(sc, "plan.offload_params", "true", "t");
  set_key(sc, "plan.micro_batch_size", "2", "t");
  set_key(sc, "plan.seq_len", "1000001", "t");
  set_key(sc, "plan.pad_to_multiple_of", "128", "t");
  set_key(sc, "plan.kv_strategy", "send_once", "t");
  set_key(sc, "plan.reduce_bucket_size", "123456789", "t");
  set_key(sc, "plan.attn_implementation", "ulysses_flash", "t");
  set_key(sc, "workload.causal", "false", "t");
  set_key(sc, "model.qkv_bias", "true", "t");
  set_key(sc, "profile.a2a_alpha_us", "13.7", "t");
  set_key(sc, "profile.cuda_context_GiB", "0.61", "t");
  sc.hw.has_calibration = true;
  sc.hw.calibrated = sample_calibration();
  REQUIRE(check(sc).empty());

  const std::string path = write(d / "rt.yaml", to_yaml(sc));
  const Scenario back = load_scenario(path);
  require_same(sc, back);
  // and again: the text is a fixed point
  CHECK(to_yaml(back) == read(path));

  // dp_shard_size: auto survives the trip
  Scenario autos = valid_scenario();
  const Scenario autos_back = load_scenario(write(d / "auto.yaml", to_yaml(autos)));
  require_same(autos, autos_back);
  CHECK(read((d / "auto.yaml").string()).find("dp_shard_size: auto") != std::string::npos);
}

TEST_CASE("calibrated section: parsed and validated, bad keys named", "[config]") {
  const fs::path d = temp_dir();
  // an uncalibrated profile (h200-sxm-141gb and h100-sxm-80gb carry measured sections)
  const std::string profile = (d / "a100.yaml").string();
  fs::copy_file(repo_dir() + "/profiles/a100-sxm-80gb.yaml", profile);
  const std::string before = read(profile);
  REQUIRE_FALSE(load_profile(profile).has_calibration);

  // bad calibrated sections name the key
  const auto with_cal = [&](const std::string& cal) {
    const std::string f = write(d / "c.yaml", before + "calibrated:\n" + cal);
    try {
      load_profile(f);
    } catch (const core::InputError& e) {
      return e.key() + ": " + e.rule();
    }
    return std::string();
  };
  CHECK(with_cal("  a2a_busbw_GBps:\n    1: [[1, 2]]\n") == "calibrated.a2a_busbw_GBps.1: must be an sp size >= 2 as the key (got 1)");
  CHECK(with_cal("  allgather_busbw_GBps:\n    1: [[1, 2]]\n") ==
        "calibrated.allgather_busbw_GBps.1: must be a number of ranks >= 2 as the key (got 1)");
  CHECK(with_cal("  reduce_scatter_busbw_GBps:\n    8: [[1, 0]]\n").rfind("calibrated.reduce_scatter_busbw_GBps.8", 0) == 0);
  CHECK(with_cal("  attn_fwd_eff:\n    flash: [[1, 0.5]]\n").rfind("calibrated.attn_fwd_eff.flash: must be one of", 0) == 0);
  CHECK(with_cal("  gemm_eff: [[1, 1.5]]\n") == "calibrated.gemm_eff[0]: must be a fraction of peak in (0, 1] (got 1.5)");
  CHECK(with_cal("  gemm_eff: [1, 2]\n") == "calibrated.gemm_eff[0]: must be a point [x, y]");
  CHECK(with_cal("  ulysses_gemm_eff:\n    bwd.6144x4096: [[1, 0.5]]\n") ==
        "calibrated.ulysses_gemm_eff.bwd.6144x4096: must be <fwd|dgrad|wgrad|wgrad_acc>.<N>x<K>, e.g. fwd.4096x4096");
  CHECK(with_cal("  ulysses_gemm_eff:\n    fwd.6144x4096: [[1, 1.2]]\n").rfind("calibrated.ulysses_gemm_eff.fwd.6144x4096[0]: must be", 0) == 0);
  CHECK(with_cal("  ulysses_gemm_eff:\n    fwd.6144x4096: [[2048, 0.7], [4096, 0.8]]\n").empty());
  CHECK(with_cal("  pack_gbps: 3\n") == "calibrated.pack_gbps: unknown key (did you mean 'pack_GBps'?)");
  CHECK(with_cal("  a2a_alpha_us: 3\n").empty());
  CHECK(with_cal("  eager_bytes_per_elem:\n    rmsnorm.fwd: 59\n    layernorm.fwd: 3\n")
            .rfind("calibrated.eager_bytes_per_elem.layernorm.fwd: must be one of rmsnorm.fwd, ", 0) == 0);
  CHECK(with_cal("  eager_bytes_per_elem:\n    rope.bwd: 0\n").rfind("calibrated.eager_bytes_per_elem.rope.bwd: must be", 0) == 0);
  CHECK(with_cal("  zero3_offload_step_ns_per_param: -1\n").rfind("calibrated.zero3_offload_step_ns_per_param: must be", 0) == 0);
  CHECK(with_cal("  eager_bytes_per_elem:\n    loss.fwd: 31.3\n").empty());
}

TEST_CASE("profile files: every figure required, sources checked", "[config]") {
  const fs::path d = temp_dir();
  std::string text = read(repo_dir() + "/profiles/a100-sxm-80gb.yaml");
  const auto err = [&](const std::string& t) {
    const std::string f = write(d / "p.yaml", t);
    try {
      load_profile(f);
    } catch (const core::InputError& e) {
      return e.key() + ": " + e.rule();
    }
    return std::string();
  };
  CHECK(err(text).empty());
  CHECK(err(replace(text, "nic_GBps: 25\n", "")) == "nic_GBps: missing required key");
  CHECK(err(replace(text, "attn_bwd_eff: 0.6", "attn_bwd_eff: 60")) == "attn_bwd_eff: must be a fraction of peak in (0, 1] (got 60)");
  CHECK(err(replace(text, "  nic_GBps: \"DGX", "  nic_gbps: \"DGX")) == "sources.nic_gbps: unknown key (did you mean 'nic_GBps'?)");
  CHECK(err(replace(text, "hbm_GiB: 80", "hbm_GB: 80")) == "hbm_GB: unknown key (did you mean 'hbm_GiB'?)");
}

TEST_CASE("sweep specs: base, list and geometric axes, validated against set_key", "[config]") {
  const SweepSpec s = load_sweep(repo_dir() + "/scenarios/sweep-llama8b-h100.yaml");
  CHECK(s.name == "sweep-llama8b-h100");
  CHECK(s.mode == "predict");
  CHECK(s.base.model.name == "llama-3.1-8b");
  REQUIRE(s.axes.size() == 4);
  CHECK(s.axes[0].key == "plan.seq_len");
  CHECK(s.axes[0].values == std::vector<std::string>{"65536", "131072", "262144", "524288", "1048576", "2097152", "4194304"});
  CHECK(s.axes[1].values == std::vector<std::string>{"1", "2", "4", "8"});

  const SweepSpec g = load_sweep(repo_dir() + "/scenarios/sweep-llama8b-plan-gpus.yaml");
  CHECK(g.mode == "plan");
  CHECK(g.granularity == 65536);
  CHECK(g.base.plan.dp_shard_auto);
  Scenario probe = g.base;  // the gpus axis keeps dp_shard on auto
  set_key(probe, "gpus", "64", g.path);
  CHECK(probe.plan.dp_shard_size == 8);
  CHECK(check(probe).empty());

  const fs::path d = temp_dir();
  write(d / "base.yaml", kValid);
  const auto err = [&](const std::string& t) {
    const std::string f = write(d / "sw.yaml", t);
    try {
      load_sweep(f);
    } catch (const core::InputError& e) {
      return e.key() + ": " + e.rule();
    }
    return std::string();
  };
  CHECK(err("base: base.yaml\naxes:\n  plan.sp_size: [1, 2]\n").empty());
  CHECK(err("base: base.yaml\naxes:\n  plan.seq_len: {geometric: {start: 3, stop: 20, factor: 2}}\n").empty());
  const SweepSpec three = load_sweep((d / "sw.yaml").string());
  CHECK(three.axes[0].values == std::vector<std::string>{"3", "6", "12"});  // stop 20 not hit
  CHECK(err("base: base.yaml\naxes:\n  plan.sp_sise: [1, 2]\n") == "axes.plan.sp_sise: unknown scenario key (did you mean 'plan.sp_size'?)");
  CHECK(err("base: base.yaml\naxes:\n  plan.sp_size: [1, -2]\n") == "axes.plan.sp_size[1]: must be a positive integer (got -2)");
  CHECK(err("base: base.yaml\naxes:\n  plan.sp_size: [1, \"2\"]\n") ==
        "axes.plan.sp_size[1]: must be a positive integer (got the string \"2\")");
  CHECK(err("base: base.yaml\naxes:\n  plan.tiled_mlp: [true, 1]\n") == "axes.plan.tiled_mlp[1]: must be true or false (got 1)");
  CHECK(err("base: base.yaml\naxes:\n  model: [llama-3.1-8b, llama-9]\n").rfind("axes.model[1]: unknown model preset 'llama-9'", 0) == 0);
  CHECK(err("base: base.yaml\naxes:\n  plan.seq_len: {geometric: {start: 8, stop: 4, factor: 2}}\n") ==
        "axes.plan.seq_len.geometric.stop: must be >= start (start 8, stop 4)");
  CHECK(err("base: base.yaml\naxes:\n  plan.seq_len: {geometric: {start: 8, stop: 64, factor: 1}}\n") ==
        "axes.plan.seq_len.geometric.factor: must be an integer >= 2 (got 1)");
  CHECK(err("base: base.yaml\naxes:\n  plan.seq_len: {linear: {start: 8}}\n") ==
        "axes.plan.seq_len.linear: unknown key (known keys here: geometric)");
  CHECK(err("base: base.yaml\naxes: {}\n") == "axes: must name at least one axis");
  CHECK(err("base: base.yaml\naxes:\n  gpus: []\n") == "axes.gpus: must list at least one value");
  CHECK(err("base: base.yaml\naxes:\n  gpus: [8]\nmode: search\n") == "mode: must be one of predict, plan (got 'search')");
  CHECK(err("base: nothere.yaml\naxes:\n  gpus: [8]\n").rfind("base: scenario file not found: nothere.yaml", 0) == 0);
  CHECK(err("axes:\n  gpus: [8]\n") == "base: missing required key");
  CHECK(err("base:\n  model: llama-3.1-8b\n  profile: h100-sxm-80gb\n  gpus: 3\n  plan: {sp_size: 3, seq_len: 9}\naxes:\n  gpus: [8]\n") ==
        "base.plan.sp_size: model.heads must be divisible by sp_size (heads 32, sp_size 3)");
}

TEST_CASE("repo_dir follows ULYSSES_HOME", "[config]") {
  const std::string source = repo_dir();
  const fs::path d = temp_dir();
  fs::create_directories(d / "scenarios" / "models");
  write(d / "scenarios" / "models" / "only.yaml", "layers: 1\nhidden: 8\nheads: 2\nkv_heads: 1\nffn_hidden: 16\nvocab: 10\n");
  ::setenv("ULYSSES_HOME", d.c_str(), 1);
  CHECK(repo_dir() == d.string());
  CHECK(load_model("only").hidden == 8);
  CHECK_THROWS_WITH(load_model("llama-3.1-8b"), Catch::Contains("(available: only)"));
  ::unsetenv("ULYSSES_HOME");
  CHECK(repo_dir() == source);
}

TEST_CASE("set_key is safe to call from several threads (sweeps run one scenario per thread)", "[config]") {
  const Scenario base = valid_scenario();
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      Scenario sc = base;
      for (int i = 0; i < 100; ++i) {
        const bool qwen = (i + t) % 2 == 0;
        set_key(sc, "model", qwen ? "qwen3-32b" : "llama-3.1-8b", "--model");
        set_key(sc, "profile", qwen ? "h200-sxm-141gb" : "h100-sxm-80gb", "--profile");
        set_key(sc, "plan.seq_len", std::to_string(1024 * (i + 1)), "--seq-len");
        if (sc.model.layers != (qwen ? 64 : 32) || sc.hw.hbm_GBps != (qwen ? 4800 : 3350) || sc.plan.seq_len != 1024 * (i + 1))
          ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  CHECK(wrong == 0);
}
