// calib/op_fit.hpp: the op bench's times become the efficiencies and per-parameter times the model reads.
#include <catch2/catch.hpp>

#include "calib/op_fit.hpp"
#include "core/flops.hpp"
#include "sim/model.hpp"
#include "sim/predict.hpp"
#include "sim/timing.hpp"
#include "tests/sim/fixtures.hpp"

using namespace ulysses;
using runtime::deepspeed::OpBench;

namespace {
constexpr double kPeak = 1000e12;
constexpr double kHbm = 4000;  // GB/s

OpBench bench() {
  OpBench b;
  // forward at 40 % and 50 % of the peak, backward at 30 %: times from the FLOP count
  for (auto [S, eff] : {std::pair<std::int64_t, double>{4096, 0.4}, {16384, 0.5}}) {
    const double f = core::attention_flops(1, S, 32, 128, true, core::Pass::fwd);
    b.attention.push_back({"sdpa", S, 32, 8, 128, true, f / (eff * kPeak), 2.5 * f / (0.3 * kPeak)});
  }
  b.gemm.push_back({"q.fwd", 4096, 4096, 4096, 2.0 * 4096 * 4096 * 4096 / (0.7 * kPeak)});
  b.gemm.push_back({"o.fwd", 4096, 4096, 4096, 2.0 * 4096 * 4096 * 4096 / (0.9 * kPeak)});  // same M*N*K: median
  b.gemm.push_back({"down.fwd", 16384, 4096, 14336, 2.0 * 16384 * 4096 * 14336 / (0.8 * kPeak)});
  b.adamw_params = 1000, b.adamw_s = 2e-6;
  b.cpu_adam_params = 1000, b.cpu_adam_s = 5e-6, b.cpu_adam_threads = 16;
  return b;
}
}  // namespace

TEST_CASE("op bench: attention curves filed per shape, efficiency from the FLOP count", "[calib][opfit]") {
  Calibration c;
  c.attn_fwd_eff.push_back({"sdpa@d128.causal.h32", Curve{{{1.0, 0.1}}}});  // replaced, not duplicated
  const auto lines = calib::apply_op_bench(bench(), kPeak, kHbm, c);
  REQUIRE(c.attn_fwd_eff.size() == 1);
  CHECK(c.attn_fwd_eff[0].first == "sdpa@d128.causal.h32");
  REQUIRE(c.attn_fwd_eff[0].second.points.size() == 2);
  CHECK(c.attn_fwd_eff[0].second.points[0].first == 4096);
  CHECK(c.attn_fwd_eff[0].second.points[0].second == Approx(0.4));
  CHECK(c.attn_fwd_eff[0].second.points[1].second == Approx(0.5));
  REQUIRE(c.attn_bwd_eff.size() == 1);
  CHECK(c.attn_bwd_eff[0].second.points[1].second == Approx(0.3));
  CHECK(lines.size() == 5);
}

TEST_CASE("op bench: GEMM curve over M*N*K, equal products merged to their median", "[calib][opfit]") {
  Calibration c;
  calib::apply_op_bench(bench(), kPeak, kHbm, c);
  REQUIRE(c.gemm_eff.points.size() == 2);
  CHECK(c.gemm_eff.points[0].first == Approx(4096.0 * 4096 * 4096));
  CHECK(c.gemm_eff.points[0].second == Approx(0.8));  // median of 0.7 and 0.9
  CHECK(c.gemm_eff.points[1].second == Approx(0.8));
  CHECK(c.torch_adamw_s_per_param == Approx(2e-9));
  CHECK(c.cpu_adam_s_per_param == Approx(5e-9));
}

namespace {
// rows with t = 5 us + elems * bytes / hbm (embed backward: + the dense gradient's part)
OpBench eager_bench() {
  OpBench b = bench();
  const double hbm = kHbm * 1e9, Vh = 128256.0 * 4096;
  for (double T : {4096.0, 16384.0, 65536.0}) {
    const double e = T * 4096;
    b.eager.push_back({"rmsnorm", T, e, 0, 5e-6 + e * 36 / hbm, 5e-6 + e * 80 / hbm});
    b.eager.push_back({"add", T, e, 0, 3e-6 + e * 6 / hbm, 0});
    b.eager.push_back({"embed", T, e, Vh, 4e-6 + e * 4 / hbm, e * 10 / hbm + Vh * 2 / hbm});
  }
  return b;
}
}  // namespace

TEST_CASE("op bench: eager passes become bytes per element (slope), the embedding's gradient from the intercept",
          "[calib][opfit]") {
  Calibration c;
  const auto lines = calib::apply_op_bench(eager_bench(), kPeak, kHbm, c);
  const auto rate = [&](EagerRate r) { return c.eager_bytes_per_elem[static_cast<std::size_t>(r)]; };
  CHECK(rate(EagerRate::rmsnorm_fwd) == Approx(36));
  CHECK(rate(EagerRate::rmsnorm_bwd) == Approx(80));
  CHECK(rate(EagerRate::add_fwd) == Approx(6));
  CHECK(rate(EagerRate::embed_fwd) == Approx(4));
  CHECK(rate(EagerRate::embed_bwd) == Approx(10));
  CHECK(rate(EagerRate::embed_grad) == Approx(2));
  CHECK(rate(EagerRate::swiglu_fwd) < 0);  // not in the bench: stays unmeasured
  CHECK(lines.size() == 5 + 6);
}

TEST_CASE("op bench: an eager op the model does not know, or a flat embedding backward, is refused", "[calib][opfit]") {
  OpBench b = eager_bench();
  b.eager.push_back({"layernorm", 4096, 4096.0 * 4096, 0, 1e-5, 1e-5});
  Calibration c;
  CHECK_THROWS_WITH(calib::apply_op_bench(b, kPeak, kHbm, c), Catch::Contains("layernorm"));
  OpBench one = bench();
  one.eager.push_back({"embed", 4096, 4096.0 * 4096, 1e9, 1e-5, 1e-4});
  CHECK_THROWS_WITH(calib::apply_op_bench(one, kPeak, kHbm, c), Catch::Contains("two token counts"));
}

TEST_CASE("op bench: an efficiency above the peak is refused", "[calib][opfit]") {
  OpBench b = bench();
  b.gemm[0].s /= 2;  // 140 % of the peak
  Calibration c;
  CHECK_THROWS_WITH(calib::apply_op_bench(b, kPeak, kHbm, c), Catch::Contains("gemm q.fwd"));
}

TEST_CASE("optimizer step: the measured per-parameter times replace the default rates", "[calib][opfit][sim]") {
  Scenario sc = test::make_scenario(test::llama31_8b(), test::h200_sxm(), 8, 8, 65536);
  sc.plan.offload_optimizer = false;
  sc.plan.torch_adam = true;
  const auto step_of = [](const Scenario& s) {
    const Prediction p = predict(s);
    for (int i = 0; i < p.step.n; ++i)
      if (std::string(p.step.phases[i].name) == "optimizer.step") return p.step.phases[i].time_s;
    return -1.0;
  };
  const double before = step_of(sc);
  sc.hw.has_calibration = true;
  sc.hw.calibrated.torch_adamw_s_per_param = 4e-9;
  const double after = step_of(sc);
  const double local_params = std::ceil(static_cast<double>(total_params(sc.model)) / 8);
  CHECK(after == Approx(local_params * (4e-9 + kZero3StepBytesPerParam / (sc.hw.hbm_GBps * 1e9))));
  CHECK(after != Approx(before));
  sc.plan.offload_optimizer = true;
  sc.hw.calibrated.cpu_adam_s_per_param = 1e-9;
  CHECK(step_of(sc) == Approx(local_params * 8 * 1e-9));  // 8 processes on the node share its cores
}

TEST_CASE("op bench: ZeRO-3's whole step per parameter, and the offload's gradient copies from the backward difference",
          "[calib][opfit][sim]") {
  OpBench b = bench();
  b.zero_step.push_back({false, true, 256e6, 0.010, 0.050});  // GPU, torch AdamW
  b.zero_step.push_back({true, false, 256e6, 0.120, 0.080});  // offloaded: backward +30 ms
  Calibration c;
  calib::apply_op_bench(b, kPeak, kHbm, c);
  CHECK(c.zero3_torch_adamw_step_s_per_param == Approx(0.010 / 256e6));
  CHECK(c.zero3_offload_step_s_per_param == Approx(0.120 / 256e6));
  CHECK(c.zero3_offload_grads_s_per_param == Approx(0.030 / 256e6));
  CHECK(c.zero3_fused_adam_step_s_per_param < 0);  // no FusedAdam row
  // FusedAdam on the GPU: its own figure, not torch AdamW's; an offload backward no slower: no gradient figure
  b.zero_step = {{false, false, 256e6, 0.020, 0.050}, {true, false, 256e6, 0.120, 0.040}};
  Calibration d;
  calib::apply_op_bench(b, kPeak, kHbm, d);
  CHECK(d.zero3_torch_adamw_step_s_per_param < 0);
  CHECK(d.zero3_fused_adam_step_s_per_param == Approx(0.020 / 256e6));
  CHECK(d.zero3_offload_grads_s_per_param < 0);
  c.zero3_fused_adam_step_s_per_param = d.zero3_fused_adam_step_s_per_param;

  // the model: the measured figures replace the formulas, per parameter of the rank's partition
  Scenario sc = test::make_scenario(test::llama31_8b(), test::h200_sxm(), 8, 8, 65536);
  sc.hw.has_calibration = true;
  sc.hw.calibrated = c;
  sc.plan.offload_optimizer = false;
  sc.plan.torch_adam = true;
  const double local_params = std::ceil(static_cast<double>(total_params(sc.model)) / 8);
  Prediction p = predict(sc);
  CHECK(p.step.get("optimizer.step") == Approx(local_params * 0.010 / 256e6));
  CHECK(p.step.get("offload.grads") == 0);
  sc.plan.torch_adam = false;  // FusedAdam: its own measured step
  CHECK(predict(sc).step.get("optimizer.step") == Approx(local_params * 0.020 / 256e6));
  sc.plan.offload_optimizer = true;
  p = predict(sc);
  CHECK(p.step.get("optimizer.step") == Approx(local_params * 8 * 0.120 / 256e6));  // 8 processes on the node
  CHECK(p.step.get("offload.grads") == Approx(local_params * 0.030 / 256e6));
  CHECK(p.step.get("offload.optimizer") == 0);  // the parameters' copy back is inside the measured step
  sc.plan.runtime = Runtime::ulysses;  // not DeepSpeed's step: the figures do not apply
  CHECK(predict(sc).step.get("optimizer.step") != Approx(local_params * 8 * 0.120 / 256e6));
}
