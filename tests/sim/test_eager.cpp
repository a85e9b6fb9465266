// sim/eager_time.hpp: the eager elementwise passes counted per layer as docs/MODEL.md's table says.
#include <catch2/catch.hpp>

#include "sim/eager_time.hpp"
#include "sim/memory.hpp"
#include "sim/predict.hpp"
#include "tests/sim/fixtures.hpp"

using namespace ulysses;

namespace {
// every rate 1 byte per element except the ones a case sets: times are element counts / hbm
Scenario unit_rates(Scenario sc) {
  sc.hw.has_calibration = true;
  sc.hw.calibrated.eager_bytes_per_elem.fill(1.0);
  return sc;
}
}  // namespace

TEST_CASE("eager passes: per-layer counts of norms, RoPE + residual adds, SwiGLU and the embedding", "[sim][eager]") {
  Scenario sc = unit_rates(test::make_scenario(test::llama31_8b(), test::h200_sxm(), 8, 8, 131072));
  const Dims d = derive_dims(sc);
  const double hbm = sc.hw.hbm_GBps * 1e9, T = 16384, h = 4096, F = 14336, L = 32, qk = T * (32 + 8) * 128;
  REQUIRE(d.S_l == 16384);
  EagerTimes e = eager_times(sc, d);
  CHECK(e.norm_fwd == Approx((2 * L + 1) * T * h / hbm));  // two per layer + the final norm
  CHECK(e.norm_bwd == Approx((2 * L + 1) * T * h / hbm));
  CHECK(e.norm_recompute == Approx(2 * L * T * h / hbm));  // the final norm is not checkpointed
  CHECK(e.rope_add_fwd == Approx(L * (qk + 2 * T * h) / hbm));
  CHECK(e.rope_add_recompute == Approx(L * (qk + T * h) / hbm));  // stops before the second add
  CHECK(e.rope_add_bwd == Approx(L * (qk + 2 * T * h) / hbm));
  CHECK(e.swiglu_fwd == Approx(L * T * F / hbm));
  CHECK(e.swiglu_tiled_recompute == 0);
  CHECK(e.embed_bwd == Approx((T * h + 128256.0 * h) / hbm));
  CHECK(loss_pass_s(sc, d, true) == Approx(T * 128256.0 / hbm));  // one pass over the logits
  sc.hw.calibrated.eager_bytes_per_elem[static_cast<std::size_t>(EagerRate::loss_bwd)] = 7;
  CHECK(loss_pass_s(sc, d, false) == Approx(7 * T * 128256.0 / hbm));
  sc.plan.runtime = Runtime::ulysses;  // our cross-entropy kernel: 6 B per logit in the forward, nothing after
  CHECK(loss_pass_s(sc, d, true) == Approx(6 * T * 128256.0 / hbm));
  CHECK(loss_pass_s(sc, d, false) == 0);
  sc.plan.runtime = Runtime::pytorch;
  // a rate changes only its own terms
  sc.hw.calibrated.eager_bytes_per_elem[static_cast<std::size_t>(EagerRate::rmsnorm_bwd)] = 3;
  CHECK(eager_times(sc, d).norm_bwd == Approx(3 * e.norm_bwd));
  CHECK(eager_times(sc, d).norm_fwd == Approx(e.norm_fwd));
  // Qwen3's q/k norms over the head dim join the layer's norms
  sc.model.qk_norm = true;
  CHECK(eager_times(sc, d).norm_fwd == Approx(e.norm_fwd + L * qk / hbm));
  sc.model.qk_norm = false;
  // no checkpointing: no recompute; TiledMLP reruns the activation product in the backward
  sc.plan.activation_checkpointing = false;
  sc.plan.tiled_mlp = true;
  e = eager_times(sc, derive_dims(sc));
  CHECK(e.norm_recompute == 0);
  CHECK(e.rope_add_recompute == 0);
  CHECK(e.swiglu_recompute == 0);
  CHECK(e.swiglu_tiled_recompute == Approx(e.swiglu_fwd));
}

TEST_CASE("eager passes: PyTorch's defaults, and our runtime's kernels by their own traffic", "[sim][eager]") {
  Scenario sc = test::make_scenario(test::llama31_8b(), test::h200_sxm(), 8, 8, 65536);
  const EagerTimes def = eager_times(sc, derive_dims(sc));
  CHECK(def.norm_fwd > 0);
  CHECK(def.embed_bwd > def.embed_fwd);
  CHECK(def.fork_adds_mlp_bwd == 0);
  for (int i = 0; i < kEagerRates; ++i) CHECK(eager_bytes_per_elem(sc, static_cast<EagerRate>(i)) > 0);
  // the step carries them: the prediction's phases of the same names
  const Prediction p = predict(sc);
  CHECK(p.step.get("norm.fwd") == Approx(def.norm_fwd));
  CHECK(p.step.get("rope_add.bwd") == Approx(def.rope_add_bwd));
  // our runtime (uncalibrated): each kernel's reads and writes at the HBM rate
  sc.plan.runtime = Runtime::ulysses;
  const Dims d = derive_dims(sc);
  const double hbm = sc.hw.hbm_GBps * 1e9, T = 8192, h = 4096, F = 14336, L = 32, V = 128256, qk = T * (32 + 8) * 128;
  REQUIRE(d.S_l == 8192);
  const EagerTimes ours = eager_times(sc, d);
  CHECK(ours.norm_fwd == Approx((2 * L + 1) * 4 * T * h / hbm));
  CHECK(ours.norm_bwd == Approx((2 * L + 1) * 6 * T * h / hbm));
  CHECK(ours.rope_add_fwd == Approx(L * (4 * qk + 2 * 6 * T * h) / hbm));
  CHECK(ours.swiglu_bwd == Approx(L * 10 * T * F / hbm));
  CHECK(ours.embed_bwd == Approx((10 * T * h + 4 * V * h) / hbm));
  CHECK(ours.fork_adds_mlp_bwd == Approx(L * 6 * T * h / hbm));
  CHECK(ours.fork_adds_qkv_bwd == Approx(2 * ours.fork_adds_mlp_bwd));
  sc.model.tied_embeddings = true;  // + the lm_head's gradient added into the embedding's
  CHECK(eager_times(sc, d).embed_bwd == Approx((10 * T * h + (4 + 10) * V * h) / hbm));
  sc.model.tied_embeddings = false;
  // the fork adds land in the phases of the GEMMs they follow; the recompute stops before down_proj
  const Prediction q = predict(sc);
  sc.plan.runtime = Runtime::pytorch;
  const Prediction pt = predict(sc);
  CHECK(q.step.get("mlp.bwd") - ours.fork_adds_mlp_bwd == Approx(pt.step.get("mlp.bwd")));
  CHECK(q.step.get("gemm.qkv.bwd") - ours.fork_adds_qkv_bwd == Approx(pt.step.get("gemm.qkv.bwd")));
  CHECK(q.step.get("mlp.recompute") < 0.7 * pt.step.get("mlp.recompute"));  // gate and up of gate, up, down
  CHECK(q.step.get("mlp.recompute") > 0.6 * pt.step.get("mlp.recompute"));
  // a calibrated rate of our runtime changes only our runtime's term
  sc.plan.runtime = Runtime::ulysses;
  sc.hw.has_calibration = true;
  sc.hw.calibrated.ulysses_bytes_per_elem[static_cast<std::size_t>(EagerRate::rmsnorm_bwd)] = 24;
  CHECK(eager_times(sc, d).norm_bwd == Approx(4 * ours.norm_bwd));
  CHECK(eager_times(sc, d).norm_fwd == Approx(ours.norm_fwd));
  sc.plan.runtime = Runtime::pytorch;
  CHECK(eager_times(sc, d).norm_bwd == Approx(def.norm_bwd));
}
