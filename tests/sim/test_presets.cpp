// The shipped inputs: model presets match their published parameter counts, hardware profiles
// give a source for every figure, and every example scenario and sweep spec loads and validates.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "sim/config.hpp"
#include "sim/model.hpp"

namespace fs = std::filesystem;
using namespace ulysses;

namespace {

std::vector<std::string> stems(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(repo_dir() + "/" + dir))
    if (e.path().extension() == ".yaml") out.push_back(e.path().stem().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("the required model presets exist", "[presets]") {
  const auto names = stems("scenarios/models");
  for (const char* want : {"llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "qwen3-4b", "qwen3-8b", "qwen3-32b"}) {
    INFO(want);
    CHECK(std::find(names.begin(), names.end(), want) != names.end());
  }
}

TEST_CASE("every model preset: parameter count within 1% of the published figure", "[presets]") {
  for (const auto& name : stems("scenarios/models")) {
    const ModelSpec m = load_model(name);
    const double total = static_cast<double>(total_params(m));
    const double published = static_cast<double>(m.published_params);
    INFO(name << ": total_params " << total / 1e9 << "B, published " << published / 1e9 << "B");
    CHECK(m.name == name);
    REQUIRE(m.published_params > 0);
    CHECK(std::abs(total - published) / published < 0.01);
    CHECK(m.source.rfind("https://huggingface.co/", 0) == 0);
    CHECK(m.heads * m.head_dim > 0);
    CHECK(m.heads % m.kv_heads == 0);
  }
}

TEST_CASE("model presets carry the config.json architecture", "[presets]") {
  // Qwen3-4B: tied embeddings, qk_norm, head_dim 128 with hidden 2560 (H*D != h).
  const ModelSpec q4 = load_model("qwen3-4b");
  CHECK(q4.layers == 36);
  CHECK(q4.hidden == 2560);
  CHECK(q4.heads == 32);
  CHECK(q4.kv_heads == 8);
  CHECK(q4.head_dim == 128);
  CHECK(q4.ffn_hidden == 9728);
  CHECK(q4.vocab == 151936);
  CHECK(q4.tied_embeddings);
  CHECK(q4.qk_norm);
  CHECK_FALSE(q4.qkv_bias);
  // Qwen3-32B: untied.
  const ModelSpec q32 = load_model("qwen3-32b");
  CHECK(q32.layers == 64);
  CHECK(q32.hidden == 5120);
  CHECK(q32.heads == 64);
  CHECK(q32.kv_heads == 8);
  CHECK(q32.head_dim == 128);
  CHECK(q32.ffn_hidden == 25600);
  CHECK(q32.vocab == 151936);
  CHECK_FALSE(q32.tied_embeddings);
  // Llama-3.1-8B: 32 x 4096, 32/8 heads, SwiGLU 14336, vocab 128256, untied.
  const ModelSpec l8 = load_model("llama-3.1-8b");
  CHECK(l8.layers == 32);
  CHECK(l8.hidden == 4096);
  CHECK(l8.heads == 32);
  CHECK(l8.kv_heads == 8);
  CHECK(l8.head_dim == 128);
  CHECK(l8.ffn_hidden == 14336);
  CHECK(l8.vocab == 128256);
  CHECK_FALSE(l8.tied_embeddings);
  // Golden count: 32 * (4096*4096*2 + 2*4096*1024 + 3*4096*14336 + 2*4096) + 2*128256*4096 + 4096
  //             = 32 * 218112000 + 1050673152 + 4096 = 8030261248
  CHECK(total_params(l8) == 8030261248LL);
}

TEST_CASE("every hardware profile names a source for every figure", "[presets]") {
  const std::vector<std::string> fields = {
      "gpu", "hbm_GiB", "bf16_dense_TFLOPs", "hbm_GBps", "nvlink_GBps", "gpus_per_node", "host_ram_GiB",
      "host_link_GBps", "nic_GBps", "attn_fwd_eff", "attn_bwd_eff", "gemm_eff", "a2a_link_eff", "a2a_alpha_us",
      "cuda_context_GiB", "nccl_buffer_GiB"};
  const auto names = stems("profiles");
  for (const char* want : {"h100-sxm-80gb", "h200-sxm-141gb", "a100-sxm-80gb", "cpu-local"})
    CHECK(std::find(names.begin(), names.end(), want) != names.end());
  for (const auto& name : names) {
    const HardwareProfile p = load_profile(name);
    CHECK(p.name == name);
    for (const auto& f : fields) {
      INFO(name << ": " << f);
      const auto it = std::find_if(p.sources.begin(), p.sources.end(), [&](const auto& s) { return s.first == f; });
      REQUIRE(it != p.sources.end());
      CHECK(it->second.size() > 10);
    }
  }
}

TEST_CASE("profile figures are converted to the struct's units", "[presets]") {
  const HardwareProfile h200 = load_profile("h200-sxm-141gb");
  CHECK(h200.hbm_bytes == static_cast<core::bytes_t>(std::llround(140.4 * core::kGiB)));  // 143771 MiB
  CHECK(h200.bf16_dense_flops == Approx(989.4e12));
  CHECK(h200.nvlink_GBps == 450);
  CHECK(h200.a2a_alpha_s == Approx(25e-6));
  CHECK(h200.cuda_context_bytes == core::kGiBytes);
  CHECK(h200.host_ram_bytes == 2048 * core::kGiBytes);
  // ANCHORS.md efficiencies: FA2 338/317 TFLOP/s, GEMM ~790, a2a 331.4 of 450 GB/s
  CHECK(h200.attn_fwd_eff * 989.4 == Approx(338).epsilon(0.01));
  CHECK(h200.attn_bwd_eff * 989.4 == Approx(317).epsilon(0.01));
  CHECK(h200.gemm_eff * 989.4 == Approx(790).epsilon(0.01));
  CHECK(h200.a2a_link_eff * 450 == Approx(331.4).epsilon(0.01));
  // measured on the project's 2x H200 host by `ulysses calibrate --backend cuda` (issue 6)
  CHECK(h200.has_calibration);
  CHECK(h200.calibrated.provenance.find("NVIDIA H200") != std::string::npos);
  const HardwareProfile a100 = load_profile("a100-sxm-80gb");
  CHECK(a100.hbm_bytes == 80 * core::kGiBytes);
  CHECK(a100.bf16_dense_flops == Approx(312e12));
}

TEST_CASE("every example scenario and sweep spec loads and validates", "[presets]") {
  int scenarios = 0, sweeps = 0;
  for (const auto& name : stems("scenarios")) {
    const std::string path = repo_dir() + "/scenarios/" + name + ".yaml";
    INFO(path);
    if (name.rfind("sweep-", 0) == 0) {
      const SweepSpec s = load_sweep(path);
      CHECK_FALSE(s.axes.empty());
      CHECK(check(s.base).empty());
      ++sweeps;
    } else {
      const Scenario sc = load_scenario(path);
      CHECK(check(sc).empty());
      ++scenarios;
    }
  }
  CHECK(scenarios >= 3);
  CHECK(sweeps >= 1);
  const Scenario alst = load_scenario(repo_dir() + "/scenarios/llama8b-h100-sp8.yaml");
  CHECK(alst.plan.zero_stage == 3);
  CHECK(alst.plan.offload_optimizer);
  CHECK(alst.plan.activation_checkpointing);
  CHECK(alst.plan.offload_checkpoints);
  CHECK(alst.plan.tiled_logits);
  CHECK(alst.plan.tiled_mlp);
  CHECK(alst.plan.sp_size == 8);
  const Scenario l70 = load_scenario(repo_dir() + "/scenarios/llama70b-h200-sp32.yaml");
  CHECK(l70.plan.sp_size == 32);
  CHECK(l70.plan.sp_size % l70.model.kv_heads == 0);  // kv heads replicated 32 / 8 = 4 times
}
