// The whole step on one GPU (runtime/cuda/step_runner.hpp) against its fp64 oracle
// (runtime/reference_step.hpp) at a small Llama-like shape with two layers: the loss and every
// gradient (embedding, each layer's nine parameters, the final norm, the lm_head), for the plans the
// runner has (checkpointing on and off, tiled and untiled logits, tied and untied embeddings). The GPU
// rounds every intermediate to bf16, the oracle none: loss within 0.5 %, each gradient's relative L2
// error within 5 % (two layers of the decoder layer test's 3 % plus the loss head); two gradients
// swapped must be far apart, so the comparison can fail. The arena's peak equals the step model's
// mirror of the buffers (sim/step_runtime_memory.hpp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/bf16.hpp"
#include "runtime/cuda/step_runner.hpp"
#include "runtime/reference_layer.hpp"
#include "kernels/layer_ops.hpp"
#include "sim/step_runtime_memory.hpp"
#include "tests/gpu/gpu_util.hpp"
#include "tests/gpu/step_arena.hpp"

using namespace ulysses;
using gputest::rel_l2;

namespace {


struct Opt {  // the plan beyond tied / checkpoint / logits shards
  bool qk_norm = false;
  std::int64_t H = 4, L = 2, mlp_shards = 1;
  bool offload = false;
};

void check_step(bool tied, bool checkpoint, std::int64_t shards, Opt o = {}) {
  const bool qk_norm = o.qk_norm;
  runtime::StepDims d;  // H = 6: H D = 768 differs from h, as in Qwen3-4B (a swapped h and H D shows)
  d.layer.T = 512, d.layer.h = 512, d.layer.H = o.H, d.layer.H_kv = 2, d.layer.D = 128, d.layer.F = 1024;
  d.L = o.L, d.V = 1000, d.tied = tied, d.layer.qk_norm = qk_norm, d.layer.mlp_shards = o.mlp_shards;
  const std::int64_t T = d.layer.T;
  const std::uint64_t seed = 77;
  std::vector<std::int64_t> tokens(T), pos(T);
  for (std::int64_t t = 0; t < T; ++t) tokens[t] = (t * 7919 + 13) % d.V, pos[t] = t;
  std::vector<std::int64_t> labels = runtime::shift_labels(tokens);
  for (std::int64_t t = 5; t < T; t += 37) labels[t] = runtime::kIgnoreLabel;  // padding-like holes
  std::vector<core::bf16> cos, sin;
  runtime::rope_tables(T, d.layer.D, pos.data(), 500000.0, cos, sin);
  const runtime::StepParams p = runtime::cuda::StepRunner::host_params(d, seed);
  const runtime::StepResult ref = runtime::step_reference(d, p, tokens, labels, cos, sin, shards);

  runtime::cuda::DeviceArena arena(0);
  runtime::cuda::Gemm gemm;
  runtime::cuda::StepPlan plan;
  plan.checkpoint = checkpoint, plan.logits_shards = shards, plan.offload_checkpoints = o.offload;
  plan.optimizer = false;  // the gradients of the seeded parameters (the optimizer's own test is below)
  runtime::cuda::StepRunner run(d, plan, arena, gemm, seed);
  run.set_batch(tokens, labels, cos, sin);
  run.step(nullptr, nullptr);
  run.step(nullptr, nullptr);  // a second step gives the same gradients (nothing accumulates across steps)
  CUDA_CHECK(cudaDeviceSynchronize());
  const runtime::StepResult g = run.grads();
  std::printf("step tied=%d checkpoint=%d shards=%lld qk_norm=%d L=%lld mlp_shards=%lld offload=%d: loss %.6f (fp64 %.6f), valid %lld, "
              "arena peak %lld bytes, pinned %lld\n", tied, checkpoint, (long long)shards, qk_norm, (long long)o.L,
              (long long)o.mlp_shards, o.offload, g.loss, ref.loss, (long long)g.valid_tokens, (long long)arena.peak_bytes(),
              (long long)run.host_pinned_bytes());
  CHECK(g.valid_tokens == ref.valid_tokens);
  Dims sd;  // the step model's mirror of the runner's buffers (sim/step_runtime_memory.hpp), byte for byte
  sd.B = 1, sd.S = sd.S_l = T, sd.h = d.layer.h, sd.H = d.layer.H, sd.H_kv = d.layer.H_kv, sd.D = d.layer.D;
  sd.F = d.layer.F, sd.V = d.V, sd.L = d.L, sd.ckpt = checkpoint, sd.logits_shards = shards, sd.mlp_shards = o.mlp_shards;
  StepRuntimeFlags f;
  f.tied = tied, f.flash = true, f.qk_norm = qk_norm, f.offload_checkpoints = o.offload, f.optimizer = false;
  const StepRuntimeBytes mirror = ulysses_step_bytes(sd, f);
  CHECK(run.host_pinned_bytes() == mirror.host_pinned);
  CHECK(arena.peak_bytes() == gputest::expected_arena_peak(mirror, d.layer));
  CHECK(std::abs(g.loss - ref.loss) <= 5e-3 * ref.loss);
  std::vector<std::pair<std::string, double>> errs = {{"embed", rel_l2(g.d_embed, ref.d_embed)},
                                                      {"final_norm", rel_l2(g.d_final, ref.d_final)}};
  if (!tied) errs.emplace_back("lm_head", rel_l2(g.d_head, ref.d_head));
  const char* names[11] = {"w1", "wq", "wk", "wv", "wo", "w2", "wg", "wu", "wd", "wqn", "wkn"};
  for (std::size_t l = 0; l < g.d_layers.size(); ++l) {
    const auto& a = g.d_layers[l];
    const auto& b = ref.d_layers[l];
    const std::vector<double>* ga[11] = {&a.w1, &a.wq, &a.wk, &a.wv, &a.wo, &a.w2, &a.wg, &a.wu, &a.wd, &a.wqn, &a.wkn};
    const std::vector<double>* gb[11] = {&b.w1, &b.wq, &b.wk, &b.wv, &b.wo, &b.w2, &b.wg, &b.wu, &b.wd, &b.wqn, &b.wkn};
    for (int j = 0; j < (qk_norm ? 11 : 9); ++j) errs.emplace_back("layer" + std::to_string(l) + "." + names[j], rel_l2(*ga[j], *gb[j]));
  }
  double worst = 0;
  for (const auto& [name, e] : errs) {
    INFO("d" << name << " relative L2 error " << e);
    CHECK(e <= 5e-2);
    worst = std::max(worst, e);
  }
  std::printf("  worst gradient relative L2 error %.2e over %zu tensors\n", worst, errs.size());
  CHECK(rel_l2(g.d_layers[0].wg, ref.d_layers[0].wu) > 0.5);  // the comparison can tell two gradients apart
}

}  // namespace

TEST_CASE("the step on one GPU equals its fp64 oracle: untied, checkpointed, untiled logits", "[.gpu][gpu][step]") {
  check_step(false, true, 1);
}
TEST_CASE("the step on one GPU equals its fp64 oracle: tied, no checkpointing, logits in 3 chunks", "[.gpu][gpu][step]") {
  check_step(true, false, 3);
}
TEST_CASE("the step on one GPU equals its fp64 oracle: untied, checkpointed, logits in 4 chunks", "[.gpu][gpu][step]") {
  check_step(false, true, 4);
}
TEST_CASE("the step on one GPU equals its fp64 oracle: Qwen3's head norms, H D != h, tied, checkpointed, 2 chunks", "[.gpu][gpu][step]") {
  Opt o;
  o.qk_norm = true, o.H = 6;
  check_step(true, true, 2, o);
}
TEST_CASE("the step on one GPU equals its fp64 oracle: TiledMLP in 3 shards, checkpoint offload, 3 layers", "[.gpu][gpu][step]") {
  Opt o;
  o.L = 3, o.mlp_shards = 3, o.offload = true;
  check_step(false, true, 2, o);
}
TEST_CASE("the step on one GPU equals its fp64 oracle: TiledMLP in 4 shards without checkpointing", "[.gpu][gpu][step]") {
  Opt o;
  o.mlp_shards = 4;
  check_step(true, false, 1, o);
}
