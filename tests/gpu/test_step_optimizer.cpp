// The step's optimizer on one GPU (runtime/cuda/optimizer.hpp) against AdamW in fp64
// (runtime/reference_adam.hpp) fed with the step's own gradients, over two steps (the bias corrections
// of t = 1 and 2), with clipping active (max_grad_norm far below the norm) and weight decay on; on the
// device, and offloaded to the host (runtime/host_adam.hpp: the parameters then come back to the device). Checked
// per tensor: the norm and coefficient, the fp32 master weights, both moments, and the bf16 parameters
// equal to the master weights rounded to nearest even; Qwen3's head norms on, so the fp32-gradient [D] tensors
// are among them. A missing decay term, swapped betas or an
// unclipped gradient each move a value by more than the tolerances (stated at the checks).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "core/bf16.hpp"
#include "runtime/cuda/step_runner.hpp"
#include "kernels/layer_ops.hpp"
#include "runtime/host_adam.hpp"
#include "runtime/reference_adam.hpp"
#include "runtime/reference_layer.hpp"
#include "runtime/reference_step.hpp"
#include "sim/step_runtime_memory.hpp"
#include "tests/gpu/gpu_util.hpp"
#include "tests/gpu/step_arena.hpp"

using namespace ulysses;

namespace {

std::vector<double> widen(const std::vector<core::bf16>& v) {
  std::vector<double> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = core::bf16_to_float(v[i]);
  return out;
}


void check_optimizer(bool offload) {
  runtime::StepDims d;
  d.layer.T = 256, d.layer.h = 256, d.layer.H = 2, d.layer.H_kv = 1, d.layer.D = 128, d.layer.F = 512;
  d.L = 2, d.V = 500, d.tied = false;
  d.layer.qk_norm = true;  // Qwen3's head norms: fp32 gradients of [D] tensors in the optimizer too
  const std::int64_t T = d.layer.T;
  const std::uint64_t seed = 5;
  std::vector<std::int64_t> tokens(T), pos(T);
  for (std::int64_t t = 0; t < T; ++t) tokens[t] = (t * 131 + 7) % d.V, pos[t] = t;
  std::vector<core::bf16> cos, sin;
  runtime::rope_tables(T, d.layer.D, pos.data(), 500000.0, cos, sin);

  runtime::cuda::DeviceArena arena(0);
  runtime::cuda::Gemm gemm;
  runtime::cuda::StepPlan plan;
  plan.adam.lr = 1e-3, plan.adam.weight_decay = 0.01, plan.adam.max_grad_norm = 1e-3;
  plan.offload_optimizer = offload, plan.host_threads = 4;
  runtime::cuda::StepRunner run(d, plan, arena, gemm, seed);
  run.set_batch(tokens, runtime::shift_labels(tokens), cos, sin);
  // the state on the device, or on the host (offload): the same questions of both
  const runtime::cuda::AdamW* dev = run.optimizer();
  const runtime::HostAdamW* host = run.host_optimizer();
  REQUIRE((offload ? host != nullptr && dev == nullptr : dev != nullptr && host == nullptr));
  const std::size_t n_tensors = offload ? host->tensors() : dev->tensors();
  auto state = [&](std::size_t i) {
    if (!offload) return dev->state(i);
    const auto wide = [](const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); };
    return runtime::AdamState{wide(host->master(i)), wide(host->m(i)), wide(host->v(i))};
  };
  auto last_clip = [&] { return offload ? host->last_clip() : dev->last_clip(); };
  {  // the arena and the pinned staging against the mirror (sim/step_runtime_memory.hpp)
    Dims sd;
    sd.B = 1, sd.S = sd.S_l = T, sd.h = d.layer.h, sd.H = d.layer.H, sd.H_kv = d.layer.H_kv, sd.D = d.layer.D;
    sd.F = d.layer.F, sd.V = d.V, sd.L = d.L, sd.ckpt = true, sd.logits_shards = 1;
    StepRuntimeFlags f;
    f.offload_optimizer = offload, f.qk_norm = true;
    const StepRuntimeBytes mirror = ulysses_step_bytes(sd, f);
    CHECK(run.host_pinned_bytes() == mirror.host_pinned);
    CHECK(arena.peak_bytes() == gputest::expected_arena_peak(mirror, d.layer));
  }

  // the kernel receives the hyper-parameters as fp32 (as DeepSpeed's FusedAdam does): 1 - float(0.999) is
  // 1.3e-5 away from 0.001, so the oracle takes the same values
  runtime::AdamConfig cfg = plan.adam;
  for (double* x : {&cfg.lr, &cfg.beta1, &cfg.beta2, &cfg.eps, &cfg.weight_decay}) *x = double(float(*x));
  const runtime::StepParams p0 = runtime::cuda::StepRunner::host_params(d, seed);
  std::vector<std::vector<double>> params0;  // in the optimizer's order (runtime/reference_step.hpp param_tensors)
  for (const auto* t : runtime::param_tensors(d, p0)) params0.push_back(widen(*t));
  REQUIRE(params0.size() == n_tensors);
  std::vector<runtime::AdamState> ref;
  for (const auto& p : params0) ref.push_back(runtime::adam_state_from(p));

  for (std::int64_t t = 1; t <= 2; ++t) {
    run.step(nullptr, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    const runtime::StepResult g = run.grads();  // the gradients this step's optimizer read
    std::vector<std::vector<double>> grads;
    for (const auto* x : runtime::grad_tensors(d, g)) grads.push_back(*x);
    const runtime::ClipResult want = runtime::clip_gradients(runtime::grad_tensors(d, g), plan.adam.max_grad_norm);
    const runtime::ClipResult got = last_clip();
    std::printf("adam (%s) step %lld: gradient norm %.6e (fp64 %.6e), coefficient %.6e (fp64 %.6e)\n", offload ? "host" : "device", (long long)t, got.norm, want.norm,
                got.coef, want.coef);
    CHECK(std::abs(got.norm - want.norm) <= 1e-5 * want.norm);  // fp32 partial sums of fp32 squares
    CHECK(want.coef < 0.5);                                      // clipping is active
    CHECK(std::abs(got.coef - want.coef) <= 1e-5 * want.coef);
    double worst_master = 0, worst_m = 0, worst_v = 0, moved = 0;
    for (std::size_t i = 0; i < grads.size(); ++i) {
      const std::vector<double> m_prev = ref[i].m;
      runtime::adamw_reference(ref[i], grads[i], want.coef, t, cfg);
      const runtime::AdamState s = state(i);
      const std::vector<double> p = run.param(i);
      for (std::size_t k = 0; k < grads[i].size(); ++k) {
        // master: fp32 rounding of the value (1e-6 relative) and of the update (lr 1e-4); the decay term alone is
        // lr wd |p| = 1e-5 |p|, a swapped or missing term more
        const double dm = std::abs(s.master[k] - ref[i].master[k]);
        worst_master = std::max(worst_master, dm / (1e-6 * std::abs(ref[i].master[k]) + 1e-4 * plan.adam.lr));
        // moments: fp32 products and the coefficient's fp32 norm (1e-5 relative to the terms summed: m's two
        // terms can cancel)
        const double m_scale = cfg.beta1 * std::abs(m_prev[k]) + (1 - cfg.beta1) * std::abs(grads[i][k] * want.coef);
        worst_m = std::max(worst_m, std::abs(s.m[k] - ref[i].m[k]) / (1e-5 * m_scale + 1e-30));
        worst_v = std::max(worst_v, std::abs(s.v[k] - ref[i].v[k]) / (1e-5 * std::abs(ref[i].v[k]) + 1e-30));
        moved = std::max(moved, std::abs(s.master[k] - params0[i][k]));
        const float master = static_cast<float>(s.master[k]);
        INFO("tensor " << i << " element " << k);
        REQUIRE(p[k] == core::bf16_to_float(core::float_to_bf16(master)));  // the bf16 parameter is the rounded master
      }
    }
    std::printf("  worst error / tolerance: master %.3f, m %.3f, v %.3f; largest move %.3e (lr %.1e)\n", worst_master, worst_m,
                worst_v, moved, plan.adam.lr);
    CHECK(worst_master <= 1.0);
    CHECK(worst_m <= 1.0);
    CHECK(worst_v <= 1.0);
    CHECK(moved > 0.5 * plan.adam.lr * double(t));  // Adam moves a parameter by about lr per step
  }
}

}  // namespace

TEST_CASE("the step's AdamW equals fp64 AdamW on the step's own gradients: two steps, clipped, weight decay", "[.gpu][gpu][step][adam]") {
  check_optimizer(false);
}
TEST_CASE("the step's AdamW on the host (offload_optimizer) equals fp64 AdamW, and its parameters reach the device", "[.gpu][gpu][step][adam]") {
  check_optimizer(true);
}
