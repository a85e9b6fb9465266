// Time model: golden formulas (arithmetic in the comments), causal halving, calibrated
// curves overriding datasheet figures, NIC bound, step accounting.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "core/flops.hpp"
#include "sim/predict.hpp"
#include "sim/timing.hpp"
#include "tests/sim/fixtures.hpp"

using namespace ulysses;
using test::h100_sxm;
using test::llama31_8b;
using test::make_scenario;

namespace {

core::seconds_t blk(const Prediction& p, core::BlockPhase ph) { return p.block[static_cast<int>(ph)]; }

Curve constant(double x0, double x1, double y) {
  Curve c;
  c.points = {{x0, y}, {x1, y}};
  return c;
}

}  // namespace

TEST_CASE("time: attention FLOPs and time, Llama-3.1-8B S=128K P=8", "[sim][time][golden]") {
  Scenario sc = make_scenario(llama31_8b(), h100_sxm(), 8, 8, 131072);
  const Dims d = derive_dims(sc);
  // forward: 4 * B * S^2 * H_l * D * 0.5 (causal) = 4 * 131072^2 * 4 * 128 * 0.5 = 2^44
  CHECK(core::attention_flops(d.B, d.S, d.H_l, d.D, d.causal) == 17592186044416.0);
  const Prediction p = predict(sc);
  // over bf16 dense peak x forward efficiency: 2^44 / (989.4e12 * 0.34)
  CHECK(blk(p, core::BlockPhase::attn_fwd) == Approx(17592186044416.0 / (989.4e12 * 0.34)));
  // backward: 2.5x the FLOPs over the backward efficiency
  CHECK(blk(p, core::BlockPhase::attn_bwd) == Approx(2.5 * 17592186044416.0 / (989.4e12 * 0.33)));
  // step: L layers, forward + recompute (checkpointing)
  CHECK(p.step.get("attn.fwd") == Approx(32 * blk(p, core::BlockPhase::attn_fwd)));
  CHECK(p.step.get("attn.recompute") == Approx(p.step.get("attn.fwd")));
}

TEST_CASE("time: causal halves attention time", "[sim][time]") {
  Scenario sc = make_scenario(llama31_8b(), h100_sxm(), 8, 8, 262144);
  sc.workload.causal = true;
  const Prediction c = predict(sc);
  sc.workload.causal = false;
  const Prediction n = predict(sc);
  CHECK(blk(c, core::BlockPhase::attn_fwd) == Approx(0.5 * blk(n, core::BlockPhase::attn_fwd)));
  CHECK(blk(c, core::BlockPhase::attn_bwd) == Approx(0.5 * blk(n, core::BlockPhase::attn_bwd)));
  CHECK(c.step.get("attn.bwd") == Approx(0.5 * n.step.get("attn.bwd")));
  // the exchanges do not depend on causality
  CHECK(blk(c, core::BlockPhase::a2a_qkv_fwd) == blk(n, core::BlockPhase::a2a_qkv_fwd));
}

TEST_CASE("time: all-to-all alpha-beta with pack/unpack copies", "[sim][time][golden]") {
  Scenario sc = make_scenario(llama31_8b(), h100_sxm(), 8, 8, 131072);
  const Prediction p = predict(sc);
  // one exchange of X bytes, B = 1: alpha + (P-1)/P * X / (a2a_link_eff * nvlink) + 2X / hbm
  auto t = [](double X) { return 20e-6 + 7.0 / 8.0 * X / (0.7 * 450e9) + 2 * X / 3350e9; };
  const double q = 134217728, kv = 33554432;  // q: 16384*32*128*2, k or v: 16384*8*128*2
  CHECK(blk(p, core::BlockPhase::a2a_out_fwd) == Approx(t(q)));
  // the block (`ulysses run`) sends q, k, v in one grouped exchange: one alpha
  CHECK(blk(p, core::BlockPhase::a2a_qkv_fwd) == Approx(t(q + 2 * kv)));
  CHECK(blk(p, core::BlockPhase::a2a_qkv_bwd) == Approx(blk(p, core::BlockPhase::a2a_qkv_fwd)));
  // the step (DeepSpeed's layer) runs three all-to-alls per layer: three alphas
  CHECK(p.step.get("a2a.qkv.fwd") == Approx(32 * (t(q) + 2 * t(kv))));
  CHECK(p.step.get("a2a.qkv.fwd") - 32 * blk(p, core::BlockPhase::a2a_qkv_fwd) == Approx(32 * 2 * 20e-6));
  // kv replication (P = 32 > H_kv = 8) adds the replica copies: read k (8 heads), write 32 heads,
  // for k and v: 2 * (4096*8*128*2 + 4096*32*128*2) bytes over HBM
  Scenario rep = make_scenario(llama31_8b(), h100_sxm(), 32, 32, 131072);
  Scenario once = rep;
  once.plan.kv_strategy = KvStrategy::send_once;
  CHECK(blk(predict(rep), core::BlockPhase::a2a_qkv_fwd) - blk(predict(once), core::BlockPhase::a2a_qkv_fwd) ==
        Approx(2.0 * (4096 * 8 * 128 * 2 + 4096 * 32 * 128 * 2) / 3350e9));
  // sp = 1: nothing is exchanged; the block (our runtime) still copies each tensor once between its
  // layouts (read + write at HBM speed), the DeepSpeed step has no exchange at all
  Scenario one = make_scenario(llama31_8b(), h100_sxm(), 8, 1, 131072);
  const Prediction p1 = predict(one);
  const double q1 = 131072.0 * 32 * 128 * 2, kv1 = 131072.0 * 8 * 128 * 2;
  CHECK(blk(p1, core::BlockPhase::a2a_qkv_fwd) == Approx(2 * (q1 + 2 * kv1) / 3350e9));
  CHECK(blk(p1, core::BlockPhase::a2a_out_bwd) == Approx(2 * q1 / 3350e9));
  CHECK(p1.step.get("a2a.qkv.fwd") == 0);
  CHECK(p1.step.get("a2a.out.bwd") == 0);
  CHECK(p1.step.get("a2a.out.recompute") == 0);
}

TEST_CASE("time: sp spanning nodes is bounded by the NIC", "[sim][time]") {
  Scenario sc = make_scenario(llama31_8b(), h100_sxm(), 16, 16, 131072);
  const Dims d = derive_dims(sc);
  // P = 16, 8 per node: 8 of the 15 peers are off-node;
  // busbw = min(0.7 * 450, 0.7 * 50 / (8/15)) = min(315, 65.625) = 65.625 GB/s
  CHECK(a2a_busbw_GBps(sc, d, 1e8) == Approx(65.625));
  Scenario in = make_scenario(llama31_8b(), h100_sxm(), 8, 8, 131072);
  CHECK(a2a_busbw_GBps(in, derive_dims(in), 1e8) == Approx(315.0));
}

TEST_CASE("time: calibrated curves override the datasheet figures", "[sim][time]") {
  Scenario sc = make_scenario(llama31_8b(), h100_sxm(), 8, 8, 131072);
  const Prediction datasheet = predict(sc);
  sc.hw.has_calibration = true;
  // attention efficiency curve for another implementation: ignored
  sc.hw.calibrated.attn_fwd_eff.push_back({"sdpa", constant(1024, 1 << 24, 0.9)});
  CHECK(blk(predict(sc), core::BlockPhase::attn_fwd) == Approx(blk(datasheet, core::BlockPhase::attn_fwd)));
  // ... for the plan's implementation: used
  sc.hw.calibrated.attn_fwd_eff.push_back({"flash_attention_2", constant(1024, 1 << 24, 0.5)});
  const Prediction cal = predict(sc);
  CHECK(blk(cal, core::BlockPhase::attn_fwd) == Approx(17592186044416.0 / (989.4e12 * 0.5)));
  CHECK(blk(cal, core::BlockPhase::attn_bwd) == Approx(blk(datasheet, core::BlockPhase::attn_bwd)));  // no bwd curve
  // a2a busbw curve for another sp size: ignored; for this one: used
  sc.hw.calibrated.a2a_busbw_GBps.push_back({2, constant(1 << 20, 1 << 30, 100)});
  CHECK(blk(predict(sc), core::BlockPhase::a2a_out_fwd) == Approx(blk(datasheet, core::BlockPhase::a2a_out_fwd)));
  sc.hw.calibrated.a2a_busbw_GBps.push_back({8, constant(1 << 20, 1 << 30, 200)});
  sc.hw.calibrated.a2a_alpha_s = 5e-6;
  const double q = 134217728;
  CHECK(blk(predict(sc), core::BlockPhase::a2a_out_fwd) == Approx(5e-6 + 7.0 / 8.0 * q / 200e9 + 2 * q / 3350e9));
  // GEMM efficiency curve
  sc.hw.calibrated.gemm_eff = constant(1, 1e15, 0.4);
  CHECK(predict(sc).step.get("gemm.o.fwd") == Approx(2.0 * datasheet.step.get("gemm.o.fwd")));  // 0.8 -> 0.4
  // the log-linear interpolation between samples
  Curve c;
  c.points = {{1000, 0.2}, {100000, 0.6}};
  CHECK(c.at(10000) == Approx(0.4));
  CHECK(c.at(10) == Approx(0.2));
  CHECK(c.at(1e9) == Approx(0.6));
}

TEST_CASE("time: GEMMs, backward 2x, recompute adds a forward", "[sim][time][golden]") {
  Scenario sc = make_scenario(llama31_8b(), h100_sxm(), 8, 8, 131072);
  Prediction p = predict(sc);
  // gemm.qkv per layer: 2 * T * h * (H + 2 H_kv) * D = 2 * 16384 * 4096 * 6144, 32 layers
  const double qkv = 32 * 2.0 * 16384 * 4096 * 6144 / (989.4e12 * 0.8);
  CHECK(p.step.get("gemm.qkv.fwd") == Approx(qkv));
  CHECK(p.step.get("gemm.qkv.bwd") == Approx(2 * qkv));
  CHECK(p.step.get("gemm.qkv.recompute") == Approx(qkv));
  // mlp: 3 GEMMs of 2 * T * h * F
  CHECK(p.step.get("mlp.fwd") == Approx(32 * 3 * 2.0 * 16384 * 4096 * 14336 / (989.4e12 * 0.8)));
  CHECK(p.step.get("mlp.tiled_recompute") == 0);
  sc.plan.activation_checkpointing = false;
  p = predict(sc);
  CHECK(p.step.get("gemm.qkv.recompute") == 0);
  CHECK(p.step.get("attn.recompute") == 0);
  // TiledMLP reruns the MLP forward inside backward: 4 shards of 4096 tokens, same FLOPs
  sc.plan.tiled_mlp = true;
  p = predict(sc);
  CHECK(p.step.get("mlp.tiled_recompute") == Approx(p.step.get("mlp.fwd")));
  CHECK(p.step.get("mlp.fwd") == Approx(32 * 3 * 2.0 * 16384 * 4096 * 14336 / (989.4e12 * 0.8)));
}

TEST_CASE("time: our runtime's GEMMs from their calibrated curves by pass and shape", "[sim][time]") {
  Scenario sc = make_scenario(llama31_8b(), h100_sxm(), 8, 8, 131072);  // T = 16384 a rank
  sc.plan.runtime = Runtime::ulysses;
  sc.hw.has_calibration = true;
  auto& g = sc.hw.calibrated.ulysses_gemm_eff;  // [4096, 4096]: Llama's q projection and its o projection
  g.emplace_back(gemm_curve_key(GemmPass::fwd, 4096, 4096), constant(1024, 131072, 0.5));
  g.emplace_back(gemm_curve_key(GemmPass::dgrad, 4096, 4096), constant(1024, 131072, 0.4));
  g.emplace_back(gemm_curve_key(GemmPass::wgrad, 4096, 4096), constant(1024, 131072, 0.25));
  const double peak = 989.4e12, q = 32 * 2.0 * 16384 * 4096 * 4096, kv = 32 * 2.0 * 16384 * 1024 * 4096;
  Prediction p = predict(sc);
  // our runtime runs q, k and v as three calls: q from its curve, k and v (no curve) at the profile's 0.8
  CHECK(p.step.get("gemm.qkv.fwd") == Approx(q / (peak * 0.5) + 2 * kv / (peak * 0.8)));
  CHECK(p.step.get("gemm.qkv.recompute") == Approx(p.step.get("gemm.qkv.fwd")));
  CHECK(p.step.get("gemm.o.fwd") == Approx(q / (peak * 0.5)));
  CHECK(p.step.get("gemm.o.bwd") == Approx(q / (peak * 0.4) + q / (peak * 0.25)));  // dgrad + wgrad
  // gemm.qkv.bwd also holds our runtime's fork adds: compare with the same step without curves
  Scenario plain = sc;
  plain.hw.calibrated.ulysses_gemm_eff.clear();
  const Prediction r = predict(plain);
  CHECK(p.step.get("gemm.qkv.bwd") - r.step.get("gemm.qkv.bwd") == Approx(q / (peak * 0.4) + q / (peak * 0.25) - 2 * q / (peak * 0.8)));
  CHECK(r.step.get("gemm.o.bwd") == Approx(2 * q / (peak * 0.8)));  // without curves: twice the forward
  CHECK(p.step.get("mlp.fwd") == Approx(r.step.get("mlp.fwd")));     // a shape without a curve: unchanged
  // PyTorch's step (the deepspeed backend) does not read our runtime's curves: one fused q/k/v GEMM at 0.8
  sc.plan.runtime = Runtime::pytorch;
  p = predict(sc);
  CHECK(p.step.get("gemm.qkv.fwd") == Approx((q + 2 * kv) / (peak * 0.8)));
  CHECK(p.step.get("gemm.qkv.bwd") == Approx(2 * (q + 2 * kv) / (peak * 0.8)));
}

TEST_CASE("time: tiled shards after the first accumulate their weight gradient (wgrad_acc)", "[sim][time]") {
  Scenario sc = make_scenario(llama31_8b(), h100_sxm(), 8, 8, 131072);
  sc.plan.runtime = Runtime::ulysses;
  sc.plan.tiled_logits = true;
  sc.hw.has_calibration = true;
  const Prediction before = predict(sc);
  sc.hw.calibrated.ulysses_gemm_eff.emplace_back(gemm_curve_key(GemmPass::wgrad_acc, 128256, 4096), constant(1, 1e9, 0.4));
  const Prediction after = predict(sc);
  // every logits shard but the first adds its lm_head gradient: those are now at 0.4 instead of 0.8
  const Dims d = derive_dims(sc);
  REQUIRE(d.logits_shards > 1);
  const double M = std::ceil(16384.0 / double(d.logits_shards)), t = 2 * M * 128256.0 * 4096 / 989.4e12;
  CHECK(after.step.get("logits.bwd") - before.step.get("logits.bwd") == Approx((d.logits_shards - 1) * (t / 0.4 - t / 0.8)));
  CHECK(after.step.get("logits.fwd") == Approx(before.step.get("logits.fwd")));
}

TEST_CASE("time: GEMM curve keys", "[sim][time]") {
  CHECK(gemm_curve_key(GemmPass::wgrad, 151936, 4096) == "wgrad.151936x4096");
  GemmPass p = GemmPass::fwd;
  std::int64_t N = 0, K = 0;
  REQUIRE(parse_gemm_curve_key("dgrad.14336x4096", p, N, K));
  CHECK((p == GemmPass::dgrad && N == 14336 && K == 4096));
  REQUIRE(parse_gemm_curve_key("wgrad_acc.128256x4096", p, N, K));
  CHECK(p == GemmPass::wgrad_acc);
  for (const char* bad : {"dgrad14336x4096", "bwd.1x1", "fwd.0x4", "fwd.4x", "fwd.x4", "fwd.4x4y", "fwd.-4x4", "fwd.06144x4096",
                          "fwd.+4x4", ""})
    CHECK_FALSE(parse_gemm_curve_key(bad, p, N, K));
}

TEST_CASE("time: offload transfers and the optimizer step", "[sim][time][golden]") {
  Scenario sc = test::all_features(make_scenario(llama31_8b(), h100_sxm(), 8, 8, 131072));
  Prediction p = predict(sc);
  // checkpoints: L * B*S_l*h*2 = 4294967296 bytes each way over 55 GB/s; out on a copy stream the compute stream
  // does not wait for (runtime/deepspeed/ulysses_worker/offload.py), so only a copy longer than the next layer's
  // forward shows: none here (134 MB in 2.4 ms against a layer's forward of tens of ms); back on the compute stream
  CHECK(p.step.get("offload.ckpt.d2h") == 0);
  CHECK(p.step.get("offload.ckpt.h2d") == Approx(4294967296.0 / 55e9));
  // optimizer offload, per parameter of the 1003782656-param shard: the bf16 partition to the host, back, and its
  // fp32 copy to the host (stage3.py 2025, 2028, 1456: 6 B d2h + 2 B h2d); the bf16 params back after the step
  CHECK(p.step.get("offload.grads") == Approx(1003782656.0 * 8 / 55e9));
  CHECK(p.step.get("offload.optimizer") == Approx(1003782656.0 * 2 / 55e9));
  // CPU Adam: 8 shards on the node at the stated host throughput
  CHECK(p.step.get("optimizer.step") == Approx(1003782656.0 * 8 / kHostAdamParamsPerS));
  sc.plan.offload_optimizer = false;
  sc.plan.offload_checkpoints = false;
  p = predict(sc);
  CHECK(p.step.get("offload.ckpt.d2h") == 0);
  CHECK(p.step.get("offload.optimizer") == 0);
  // GPU Adam at HBM speed + ZeRO-3's own passes (norm, flat fp32 gradient, unscale, bf16 copy)
  CHECK(p.step.get("optimizer.step") == Approx(1003782656.0 * (30 + kZero3StepBytesPerParam) / 3350e9));
  // our runtime (runtime/cuda/optimizer.cpp): the norm pass and AdamW over this rank's eighth, bf16 gradients
  // of the 7504658432 matrix elements (30 bytes each), fp32 ones of the embedding and the norms (525602816, 34)
  sc.plan.runtime = Runtime::ulysses;
  CHECK(predict(sc).step.get("optimizer.step") == Approx((7504658432.0 * 30 + 525602816.0 * 34) / 8 / 3350e9));
  // ours offloaded (runtime/host_adam.cpp): each gradient as the step holds it to the host, the stated host
  // throughput (DeepSpeedCPUAdam's calibrated rate is not ours), the bf16 parameters back
  sc.plan.offload_optimizer = true;
  sc.hw.has_calibration = true;
  sc.hw.calibrated.cpu_adam_s_per_param = 1e-6;
  p = predict(sc);
  CHECK(p.step.get("offload.grads") == Approx((7504658432.0 * 2 + 525602816.0 * 4) / 8 / 55e9));
  CHECK(p.step.get("optimizer.step") == Approx(1003782656.0 * 8 / kHostAdamParamsPerS));
  CHECK(p.step.get("offload.optimizer") == Approx(1003782656.0 * 2 / 55e9));
  sc.hw.calibrated.ulysses_host_adam_s_per_param = 0.9e-9;  // ours, measured: 8 processes share the host's cores
  CHECK(predict(sc).step.get("optimizer.step") == Approx(1003782656.0 * 8 * 0.9e-9));
  sc.hw.calibrated.ulysses_host_adam_s_per_param = -1;
  sc.hw.has_calibration = false;
  sc.hw.calibrated.cpu_adam_s_per_param = -1;
  sc.plan.offload_optimizer = false;
  sc.plan.runtime = Runtime::pytorch;
  // calibrated host link
  sc.plan.offload_checkpoints = true;
  sc.hw.has_calibration = true;
  sc.hw.calibrated.host_link_h2d_GBps = 20;
  p = predict(sc);
  CHECK(p.step.get("offload.ckpt.d2h") == 0);
  CHECK(p.step.get("offload.ckpt.h2d") == Approx(4294967296.0 / 20e9));
  // the copies out overlap the layers at the link's rate while the GPU computes: at 1 GB/s a 134 MB copy outlasts
  // a layer's forward, and L = 32 copies show their excess (PyTorch's hook: every layer's input)
  sc.hw.calibrated.host_link_d2h_GBps = 20;
  sc.hw.calibrated.host_link_d2h_busy_GBps = 1;
  const double slow_pt = predict(sc).step.get("offload.ckpt.d2h");
  CHECK(slow_pt > 0);
  sc.hw.calibrated.host_link_d2h_busy_GBps = 2;
  CHECK(slow_pt - predict(sc).step.get("offload.ckpt.d2h") == Approx(32 * 134217728.0 * (1 / 1e9 - 1 / 2e9)));
  sc.hw.calibrated.host_link_d2h_busy_GBps = 1;
  sc.plan.runtime = Runtime::ulysses;
  const double slow = predict(sc).step.get("offload.ckpt.d2h");
  CHECK(slow > 0);  // 134 MB per layer at 1 GB/s outlasts a layer's forward
  sc.hw.calibrated.host_link_d2h_GBps = 1000;  // the idle rate does not enter
  CHECK(predict(sc).step.get("offload.ckpt.d2h") == Approx(slow));
  sc.hw.calibrated.host_link_d2h_busy_GBps = 2;
  // layers 0..L-2's inputs, [16384, 4096] bf16 each, the excess over the layer's compute: the difference is the copies'
  CHECK(slow - predict(sc).step.get("offload.ckpt.d2h") == Approx(31 * 134217728.0 * (1 / 1e9 - 1 / 2e9)));
}

TEST_CASE("time: ZeRO-3 collectives", "[sim][time][golden]") {
  Scenario sc = make_scenario(llama31_8b(), h100_sxm(), 8, 8, 131072);
  const Prediction p = predict(sc);
  const double Pn = 8030261248.0;
  // all-gather of bf16 params in forward and backward: 2 * (7/8 * 2 Pn / 315e9 + alpha * (L + 2))
  CHECK(p.step.get("zero.allgather") == Approx(2 * (7.0 / 8 * 2 * Pn / 315e9 + 20e-6 * 34)));
  // reduce-scatter of fp32 grads (sp > 1): 7/8 * 4 Pn / 315e9 + alpha * L
  CHECK(p.step.get("zero.reduce_scatter") == Approx(7.0 / 8 * 4 * Pn / 315e9 + 20e-6 * 32));
  CHECK(p.step.get("dp.allreduce") == 0);
  // calibrated NCCL curves for 8 ranks (calib/cuda/collectives.hpp): the whole volume at the busbw of one call's
  // size, at most the prefetch bucket's 5e7 bf16 (a layer has 218112000 parameters) for the gathers, the fp32
  // bucket (4 * 5e8 B) for the reductions; the per-call latency is inside the curve
  sc.hw.has_calibration = true;
  sc.hw.calibrated.allgather_busbw_GBps = {{8, Curve{{{1e8, 100}, {1e9, 200}}}}};
  sc.hw.calibrated.reduce_scatter_busbw_GBps = {{8, Curve{{{1e8, 50}, {4e9, 150}}}}};
  const double ag_bw = Curve{{{1e8, 100}, {1e9, 200}}}.at(2 * 5e7), rs_bw = Curve{{{1e8, 50}, {4e9, 150}}}.at(2e9);
  const Prediction q = predict(sc);
  CHECK(q.step.get("zero.allgather") == Approx(2 * 7.0 / 8 * 2 * Pn / (ag_bw * 1e9)));
  CHECK(q.step.get("zero.reduce_scatter") == Approx(7.0 / 8 * 4 * Pn / (rs_bw * 1e9)));
  // a curve for another number of ranks does not apply
  sc.hw.calibrated.allgather_busbw_GBps = {{2, Curve{{{1e8, 100}}}}};
  CHECK(predict(sc).step.get("zero.allgather") == Approx(p.step.get("zero.allgather")));
}

TEST_CASE("time: our runtime's ZeRO-3 collectives", "[sim][time]") {
  // runtime/cuda/step_runner.cpp at sp 8: each layer gathered before its forward and, but for the last two (still
  // in their slots), again before its recompute and backward; the embedding, final norm and lm_head once; the
  // gradients reduce-scattered once in their types (bf16 matrices, fp32 norms and embedding); one call per tensor
  // (9 per layer, 3 outer)
  Scenario sc = make_scenario(llama31_8b(), h100_sxm(), 8, 8, 131072);
  sc.plan.runtime = Runtime::ulysses;
  const double L = 32, h = 4096, V = 128256;
  const double layer = 218112000.0;  // per layer: 4096 * (2 * 4096 + 2 * 1024 + 3 * 14336) + 2 * 4096
  const double layer_norms = 2 * h, outer = 2 * V * h + h;
  const double gathered = (2 * L - 2) * 2 * layer + 2 * outer;  // bytes
  const double reduced = L * (2 * (layer - layer_norms) + 4 * layer_norms) + 4 * V * h + 4 * h + 2 * V * h;
  const Prediction p = predict(sc);
  CHECK(p.step.get("zero.allgather") == Approx(7.0 / 8 * gathered / 315e9 + 20e-6 * ((2 * L - 2) * 9 + 3)));
  CHECK(p.step.get("zero.reduce_scatter") == Approx(7.0 / 8 * reduced / 315e9 + 20e-6 * (L * 9 + 3)));
  CHECK(p.step.get("dp.allreduce") == 0);
  // its layer exchanges q, k, v in one call each way: the block's exchange phases, per layer
  CHECK(p.step.get("a2a.qkv.fwd") == Approx(L * blk(p, core::BlockPhase::a2a_qkv_fwd)));
  CHECK(p.step.get("a2a.qkv.recompute") == Approx(L * blk(p, core::BlockPhase::a2a_qkv_fwd)));
  CHECK(p.step.get("a2a.qkv.bwd") == Approx(L * blk(p, core::BlockPhase::a2a_qkv_bwd)));
  CHECK(p.step.get("a2a.out.bwd") == Approx(L * blk(p, core::BlockPhase::a2a_out_bwd)));
  // offload_params: the parts from the host before each gather (1 / 8 each); at 128K every fetch ahead hides behind
  // the layer it overlaps (sim/param_fetch.hpp), so what shows is the embedding's and layer 0's at the start, against
  // the host optimizer's copy of every part back (which it then skips)
  sc.plan.offload_optimizer = true;
  const double back = predict(sc).step.get("offload.optimizer");
  REQUIRE(back > 0);
  CHECK(predict(sc).step.get("offload.params") == 0);
  sc.plan.offload_params = true;
  const Prediction off = predict(sc);
  const double local = std::ceil(8030261248.0 / 8), fetched = (V * h + layer) / 8;
  CHECK(off.step.get("offload.params") == Approx(back * fetched / local));
  CHECK(off.step.get("offload.optimizer") == 0);
  sc.plan.offload_params = sc.plan.offload_optimizer = false;
  sc.plan.sp_size = 1, sc.gpus = 1;  // one rank: nothing to gather or exchange
  CHECK(predict(sc).step.get("zero.allgather") == 0);
  {  // ... but with offload_params its parts come from the host (the whole tensors; those ahead hidden at 128K);
     // the gathers run in place and the gradients are their own parts (OneRank): no ZeRO-3 collective
    Scenario one = sc;
    one.plan.offload_optimizer = true;
    const double all_back = predict(one).step.get("offload.optimizer");  // every parameter h2d
    one.plan.offload_params = true;
    const Prediction p1 = predict(one);
    CHECK(p1.step.get("offload.params") == Approx(all_back * (V * h + layer) / 8030261248.0));
    CHECK(p1.step.get("zero.reduce_scatter") == 0);
    CHECK(p1.step.get("zero.allgather") == 0);
    // at 1K the layers are short: the fetches ahead show in part
    one.plan.seq_len = 1024;
    CHECK(predict(one).step.get("offload.params") > all_back * (V * h + layer) / 8030261248.0);
  }
  CHECK(predict(sc).step.get("zero.reduce_scatter") == 0);
  CHECK(predict(sc).step.get("a2a.qkv.fwd") == 0);
  CHECK(predict(sc).step.get("a2a.qkv.bwd") == 0);
}

TEST_CASE("time: step is the sum of phases, throughput and TFLOP/s", "[sim][time]") {
  Scenario sc = test::all_features(make_scenario(llama31_8b(), h100_sxm(), 8, 8, 1 << 20));
  const Prediction p = predict(sc);
  double s = 0;
  for (int i = 0; i < p.step.n; ++i) s += p.step.phases[i].time_s;
  CHECK(p.step_time_s == Approx(s));
  // tokens/s = B * S * (gpus / P) / step
  CHECK(p.tokens_per_s == Approx(1048576.0 / p.step_time_s));
  // papers' count: B * (2cNS + 4cLhS^2) * (gpus/P) / (step * gpus), c = 4 with checkpointing
  const double S = 1048576.0, N = 8030261248.0;
  const double meg = (2 * 4 * N * S + 4 * 4 * 32 * 4096.0 * S * S) / (p.step_time_s * 8) / 1e12;
  CHECK(p.megatron_tflops_per_gpu == Approx(meg));
  CHECK(p.hw_tflops_per_gpu > 0);
  CHECK(p.hw_tflops_per_gpu * 1e12 < 989.4e12);
  // every phase name of the block vocabulary appears in the step
  for (auto n : core::kBlockPhaseNames) CHECK(p.step.get(std::string(n).c_str()) > 0);
}

TEST_CASE("time: step time grows with S and falls with sp", "[sim][time][monotone]") {
  Scenario sc = test::all_features(make_scenario(llama31_8b(), h100_sxm(), 8, 8, 0));
  double prev = 0;
  for (std::int64_t S = 16384; S <= (1 << 22); S *= 2) {
    sc.plan.seq_len = S;
    const double t = predict(sc).step_time_s;
    CHECK(t > prev);
    prev = t;
  }
  // per-GPU attention work falls with sp at a fixed sequence
  double prev_attn = 1e300;
  for (int sp : {1, 2, 4, 8}) {
    Scenario s = make_scenario(llama31_8b(), h100_sxm(), 8, sp, 262144);
    const double a = predict(s).step.get("attn.fwd");
    CHECK(a < prev_attn);
    prev_attn = a;
  }
}

// --- predict() is allocation-free: count heap allocations made by this thread while a flag
// is set. Normally a replacement operator new that forwards to malloc/free (the rest of the binary
// is unaffected); under AddressSanitizer, which owns operator new, its allocation hook instead
// (the sanitizer build of make test, docs/INPUTS.md "Fuzzing and sanitizers").
namespace {
thread_local bool g_count_allocs = false;
thread_local long g_allocs = 0;
}  // namespace

#if defined(__SANITIZE_ADDRESS__)
#define ULYSSES_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ULYSSES_TEST_ASAN 1
#endif
#endif

#ifdef ULYSSES_TEST_ASAN
#include <sanitizer/allocator_interface.h>
namespace {
void on_malloc(const volatile void*, std::size_t) {
  if (g_count_allocs) ++g_allocs;
}
void on_free(const volatile void*) {}
const int g_hooks = __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free);
}  // namespace
#else
// gcc sees free() in the replacement delete of a pointer from the replacement new: the pair is ours
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t n) {
  if (g_count_allocs) ++g_allocs;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#endif

TEST_CASE("time: predict() makes no heap allocation", "[sim][time][speed]") {
  Scenario sc = test::all_features(make_scenario(llama31_8b(), h100_sxm(), 16, 16, 1 << 20));
  sc.hw.has_calibration = true;  // exercise the curve lookups too
  sc.hw.calibrated.attn_fwd_eff.push_back({"flash_attention_2", constant(1024, 1 << 24, 0.5)});
  sc.hw.calibrated.a2a_busbw_GBps.push_back({16, constant(1 << 20, 1 << 30, 200)});
  sc.hw.calibrated.gemm_eff = constant(1, 1e15, 0.7);
  g_allocs = 0;
  g_count_allocs = true;
  double sink = 0;
  for (int i = 0; i < 100; ++i) {
    sc.plan.seq_len = (1 << 20) + i * 16 * 1024;
    sink += predict(sc).step_time_s;
  }
  // our runtime with its per-pass GEMM curves (keys of 17 characters: past the small-string buffer if built
  // as strings)
  g_count_allocs = false;  // the set-up allocates
  sc.plan.runtime = Runtime::ulysses;
  sc.hw.calibrated.ulysses_gemm_eff.push_back({gemm_curve_key(GemmPass::wgrad, 128256, 4096), constant(1024, 1 << 24, 0.6)});
  g_count_allocs = true;
  for (int i = 0; i < 20; ++i) {
    sc.plan.seq_len = (1 << 20) + i * 16 * 1024;
    sink += predict(sc).step_time_s;
  }
  g_count_allocs = false;
  CHECK(sink > 0);
  CHECK(g_allocs == 0);
  // and the counter does count (so the check above can fail)
  g_count_allocs = true;
  auto* v = new std::vector<int>(10);
  g_count_allocs = false;
  delete v;
  CHECK(g_allocs >= 1);
}

TEST_CASE("time: step phase names are unique, stable and use docs/DESIGN.md's vocabulary", "[sim][time]") {
  const char* expected[] = {"embed.fwd", "norm.fwd", "a2a.qkv.fwd", "attn.fwd", "a2a.out.fwd", "gemm.qkv.fwd",
                            "gemm.o.fwd", "mlp.fwd", "swiglu.fwd", "rope_add.fwd", "logits.fwd", "logits.bwd",
                            "a2a.qkv.recompute", "attn.recompute", "a2a.out.recompute", "gemm.qkv.recompute",
                            "gemm.o.recompute", "mlp.recompute", "swiglu.recompute", "norm.recompute",
                            "rope_add.recompute", "mlp.tiled_recompute", "swiglu.tiled_recompute", "mlp.bwd",
                            "swiglu.bwd", "gemm.o.bwd", "a2a.out.bwd", "attn.bwd", "a2a.qkv.bwd", "gemm.qkv.bwd",
                            "rope_add.bwd", "norm.bwd", "embed.bwd", "zero.allgather",
                            "zero.reduce_scatter", "dp.allreduce", "offload.ckpt.d2h", "offload.ckpt.h2d",
                            "offload.grads", "offload.optimizer", "offload.params", "optimizer.step"};
  for (bool features : {false, true}) {
    Scenario sc = make_scenario(llama31_8b(), h100_sxm(), 8, 8, 65536);
    if (features) sc = test::all_features(sc);
    const Prediction p = predict(sc);
    REQUIRE(p.step.n == static_cast<int>(std::size(expected)));
    for (int i = 0; i < p.step.n; ++i) CHECK(std::string(p.step.phases[i].name) == expected[i]);
  }
}

TEST_CASE("time: a ZeRO group spanning nodes reduces over the NIC", "[sim][time]") {
  Scenario in = make_scenario(llama31_8b(), h100_sxm(), 8, 8, 65536);
  Scenario across = make_scenario(llama31_8b(), h100_sxm(), 16, 8, 65536);  // N = 2 * 8 over two nodes
  const double Pn = 8030261248.0;
  // ring busbw: min(0.7 * 450, 0.7 * 50) = 35 GB/s across nodes; 315 inside a node
  CHECK(predict(in).step.get("zero.reduce_scatter") == Approx(7.0 / 8 * 4 * Pn / 315e9 + 20e-6 * 32));
  CHECK(predict(across).step.get("zero.reduce_scatter") == Approx(15.0 / 16 * 4 * Pn / 35e9 + 20e-6 * 32));
}
