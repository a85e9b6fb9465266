// Time model of the step (docs/MODEL.md "Time"): every phase a formula over bytes or FLOPs divided by a bandwidth or
// a FLOP rate, calibrated curves overriding datasheet figures when present; the block's own phases come from
// sim/block_timing.cpp.
#include "sim/timing.hpp"

#include "core/flops.hpp"
#include "core/step_phases.hpp"
#include "sim/eager_time.hpp"
#include "sim/param_fetch.hpp"
#include "sim/step_runtime_memory.hpp"
#include "sim/timing_shared.hpp"

#include <algorithm>
#include <cmath>

namespace ulysses {

using namespace timing_detail;

namespace {

// DeepSpeed's default stage3_prefetch_bucket_size (elements; zero/config.py 222)
constexpr double kZero3PrefetchBucketElems = 5e7;

// Achievable ring bandwidth of a group of n ranks (all-gather, reduce-scatter, all-reduce):
// NVLink inside a node, the per-GPU NIC once the group spans nodes.
double ring_busbw_GBps(const Scenario& sc, bool spans_nodes) {
  const double nvl = sc.hw.a2a_link_eff * sc.hw.nvlink_GBps;
  return spans_nodes ? std::min(nvl, sc.hw.a2a_link_eff * sc.hw.nic_GBps) : nvl;
}
// all-gather / reduce-scatter of a buffer of `bytes` (whole buffer) over n ranks
core::seconds_t ring_time_s(const Scenario& sc, double n, double bytes, bool spans_nodes) {
  if (n <= 1) return 0;
  return (n - 1) / n * bytes / (ring_busbw_GBps(sc, spans_nodes) * kGBps);
}

double host_h2d_GBps(const Scenario& sc) { return measured_or(sc, sc.hw.calibrated.host_link_h2d_GBps, sc.hw.host_link_GBps); }
double host_d2h_GBps(const Scenario& sc) { return measured_or(sc, sc.hw.calibrated.host_link_d2h_GBps, sc.hw.host_link_GBps); }
double host_h2d_busy_GBps(const Scenario& sc) { return measured_or(sc, sc.hw.calibrated.host_link_h2d_busy_GBps, host_h2d_GBps(sc)); }

// Per-layer GEMM times: the forward (M = tokens per call; TiledMLP: per shard) and the backward (dgrad + wgrad).
struct LayerGemms {
  core::seconds_t qkv, o, mlp, mlp_gate_up;  // forward; mlp: gate, up and down; mlp_gate_up: without down
  core::seconds_t qkv_bwd, o_bwd, mlp_bwd;   // backward
  double flops_qkv, flops_o, flops_mlp;
};
// The backward of n calls of M rows: dgrad each; wgrad writing dW on the first, adding to it on the rest
// (our runtime's shards: beta = 1). Without our runtime's curves every pass is the forward's time: 2x forward.
core::seconds_t gemm_bwd_s(const Scenario& sc, double n, double M, double N, double K) {
  return n * gemm_time_s(sc, M, N, K, GemmPass::dgrad) + gemm_time_s(sc, M, N, K, GemmPass::wgrad) +
         (n - 1) * gemm_time_s(sc, M, N, K, GemmPass::wgrad_acc);
}
LayerGemms layer_gemms(const Scenario& sc, const Dims& d) {
  const double T = tokens(d);
  const auto s = layer_gemm_shapes(d.h, d.H, d.H_kv, d.D, d.F, d.V);
  const auto N = [&](GemmRole r) { return static_cast<double>(s[r].N); };
  const auto K = [&](GemmRole r) { return static_cast<double>(s[r].K); };
  const double n = static_cast<double>(d.mlp_shards), M_mlp = std::ceil(T / n);
  const double h = K(kGemmQ), HD = N(kGemmQ), KD = N(kGemmKv), F = N(kGemmGateUp);
  LayerGemms g{};
  // q, k, v: our runtime runs three calls (runtime/cuda/decoder_layer.cpp); PyTorch's is modelled as one
  // fused GEMM of the same FLOPs (its efficiency curve is over M*N*K)
  if (sc.plan.runtime == Runtime::ulysses) {
    g.qkv = gemm_time_s(sc, T, HD, h) + 2 * gemm_time_s(sc, T, KD, h);
    g.qkv_bwd = gemm_bwd_s(sc, 1, T, HD, h) + 2 * gemm_bwd_s(sc, 1, T, KD, h);
  } else {
    g.qkv = gemm_time_s(sc, T, HD + 2 * KD, h);
    g.qkv_bwd = gemm_bwd_s(sc, 1, T, HD + 2 * KD, h);
  }
  g.o = gemm_time_s(sc, T, h, HD);
  g.mlp_gate_up = n * 2 * gemm_time_s(sc, M_mlp, F, h);
  g.mlp = g.mlp_gate_up + n * gemm_time_s(sc, M_mlp, h, F) /*down*/;
  g.o_bwd = gemm_bwd_s(sc, 1, T, h, HD);
  g.mlp_bwd = 2 * gemm_bwd_s(sc, n, M_mlp, F, h) + gemm_bwd_s(sc, n, M_mlp, h, F);
  const double qkv_n = HD + 2 * KD, o_k = HD;
  g.flops_qkv = 2 * T * qkv_n * h;
  g.flops_o = 2 * T * h * o_k;
  g.flops_mlp = 3 * 2 * T * h * F;
  return g;
}

}  // namespace

double host_d2h_busy_GBps(const Scenario& sc) { return measured_or(sc, sc.hw.calibrated.host_link_d2h_busy_GBps, host_d2h_GBps(sc)); }

double gemm_eff(const Scenario& sc, double mnk) {
  const Curve& c = sc.hw.calibrated.gemm_eff;
  return sc.hw.has_calibration && !c.empty() ? c.at(mnk) : sc.hw.gemm_eff;
}

core::seconds_t gemm_time_s(const Scenario& sc, double M, double N, double K, GemmPass pass) {
  if (M <= 0 || N <= 0 || K <= 0) return 0;
  double eff = -1;
  if (sc.plan.runtime == Runtime::ulysses && sc.hw.has_calibration && !sc.hw.calibrated.ulysses_gemm_eff.empty()) {
    const GemmKeyBuf key = gemm_key_buf(pass, static_cast<std::int64_t>(N), static_cast<std::int64_t>(K));
    for (const auto& [k, c] : sc.hw.calibrated.ulysses_gemm_eff)
      if (k == key.view() && !c.empty()) eff = c.at(M);
  }
  return 2 * M * N * K / (sc.hw.bf16_dense_flops * (eff > 0 ? eff : gemm_eff(sc, M * N * K)));
}


namespace {
// A layer phase's name (core/step_phases.hpp, the vocabulary the runtimes' NVTX ranges use): a literal.
using Op = core::LayerOp;
using Pass = core::StepPass;
const char* ph(Op op, Pass pass) { return core::phase_name(op, pass).data(); }
}  // namespace

double step_times(const Scenario& sc, const Dims& d, const std::array<core::seconds_t, 6>& blk, PhaseTimes& step) {
  const Plan& pl = sc.plan;
  const double L = static_cast<double>(d.L), T = tokens(d);
  auto at = [&](core::BlockPhase p) { return blk[static_cast<int>(p)]; };
  const LayerGemms g = layer_gemms(sc, d);
  const bool ours = pl.runtime == Runtime::ulysses;
  const bool ck = d.ckpt, tm = ours ? ulysses_tiled_mlp(d) : pl.tiled_mlp;
  // DeepSpeed's Ulysses layer runs one all-to-all per tensor: q, k, v separately, and none at P = 1
  // (the block's P = 1 layout copies are our runtime's: not in the step). Our runtime's layer exchanges q, k, v in
  // one call and their gradients back in one (runtime/cuda/decoder_layer.cpp layer_forward, layer_backward): the
  // block's phases, as a2a.out's
  const core::seconds_t a2a_qkv = !ours ? qkv_exchange_s(sc, d, /*grouped=*/false) : d.P > 1 ? at(core::BlockPhase::a2a_qkv_fwd) : 0;
  const core::seconds_t a2a_qkv_bwd = !ours ? a2a_qkv : d.P > 1 ? at(core::BlockPhase::a2a_qkv_bwd) : 0;
  const core::seconds_t a2a_out_fwd = d.P > 1 ? at(core::BlockPhase::a2a_out_fwd) : 0;
  const core::seconds_t a2a_out_bwd = d.P > 1 ? at(core::BlockPhase::a2a_out_bwd) : 0;

  // logits: GEMM T x V x h (tiled: per shard) + cross-entropy elementwise traffic at HBM speed
  const double n_log = static_cast<double>(d.logits_shards), M_log = std::ceil(T / n_log);
  const core::seconds_t logits_gemm = n_log * gemm_time_s(sc, M_log, static_cast<double>(d.V), static_cast<double>(d.h));
  const core::seconds_t logits_gemm_bwd = gemm_bwd_s(sc, n_log, M_log, static_cast<double>(d.V), static_cast<double>(d.h));

  const EagerTimes e = eager_times(sc, d);  // norms, RoPE and residual adds, activation product, embedding

  step.n = 0;
  step.add(core::kEmbedFwd.data(), e.embed_fwd);
  step.add(ph(Op::norm, Pass::fwd), e.norm_fwd);
  step.add(core::a2a_qkv_phase(Pass::fwd).data(), L * a2a_qkv);
  step.add(ph(Op::attn, Pass::fwd), L * at(core::BlockPhase::attn_fwd));
  step.add(core::a2a_out_phase(Pass::fwd).data(), L * a2a_out_fwd);
  step.add(ph(Op::gemm_qkv, Pass::fwd), L * g.qkv);
  step.add(ph(Op::gemm_o, Pass::fwd), L * g.o);
  step.add(ph(Op::mlp, Pass::fwd), L * g.mlp);
  step.add("swiglu.fwd", e.swiglu_fwd);
  step.add(ph(Op::rope_add, Pass::fwd), e.rope_add_fwd);
  step.add(core::kLogitsFwd.data(), logits_gemm + loss_pass_s(sc, d, true));
  step.add(core::kLogitsBwd.data(), logits_gemm_bwd + loss_pass_s(sc, d, false));
  step.add(core::a2a_qkv_phase(Pass::recompute).data(), ck ? L * a2a_qkv : 0);
  step.add(ph(Op::attn, Pass::recompute), ck ? L * at(core::BlockPhase::attn_fwd) : 0);
  step.add(core::a2a_out_phase(Pass::recompute).data(), ck ? L * a2a_out_fwd : 0);
  step.add(ph(Op::gemm_qkv, Pass::recompute), ck ? L * g.qkv : 0);
  step.add(ph(Op::gemm_o, Pass::recompute), ck ? L * g.o : 0);
  // our runtime's recompute stops at the down projection's input, or with TiledMLP before the MLP
  // (runtime/cuda/decoder_layer.cpp layer_forward, Pass::recompute), and its TiledMLP backward reruns a
  // shard's gate and up only; HF's checkpoint reruns the whole layer, DeepSpeed's TiledMLP each shard's forward
  const core::seconds_t mlp_rerun = ours ? g.mlp_gate_up : g.mlp;
  step.add(ph(Op::mlp, Pass::recompute), ck && !(ours && tm) ? L * mlp_rerun : 0);
  step.add("swiglu.recompute", e.swiglu_recompute);
  step.add(ph(Op::norm, Pass::recompute), e.norm_recompute);
  step.add(ph(Op::rope_add, Pass::recompute), e.rope_add_recompute);
  step.add(core::kMlpTiledRecompute.data(), tm ? L * mlp_rerun : 0);
  step.add("swiglu.tiled_recompute", e.swiglu_tiled_recompute);
  step.add(ph(Op::mlp, Pass::bwd), L * g.mlp_bwd + e.fork_adds_mlp_bwd);
  step.add("swiglu.bwd", e.swiglu_bwd);
  step.add(ph(Op::gemm_o, Pass::bwd), L * g.o_bwd);
  step.add(core::a2a_out_phase(Pass::bwd).data(), L * a2a_out_bwd);
  step.add(ph(Op::attn, Pass::bwd), L * at(core::BlockPhase::attn_bwd));
  step.add(core::a2a_qkv_phase(Pass::bwd).data(), L * a2a_qkv_bwd);
  step.add(ph(Op::gemm_qkv, Pass::bwd), L * g.qkv_bwd + e.fork_adds_qkv_bwd);
  step.add(ph(Op::rope_add, Pass::bwd), e.rope_add_bwd);
  step.add(ph(Op::norm, Pass::bwd), e.norm_bwd);
  step.add(core::kEmbedBwd.data(), e.embed_bwd);

  // --- ZeRO / data-parallel collectives (ring algorithms over NVLink or the NIC)
  const double Pn = static_cast<double>(d.total_params), N = static_cast<double>(d.zero_group);
  const double R = static_cast<double>(d.dp_replicate), G = static_cast<double>(d.gpus);
  const double grad_bytes = d.P > 1 ? 4 : 2;  // DeepSpeed reduces SP gradients in fp32
  const bool zero_spans = d.zero_group > d.gpus_per_node, world_spans = d.gpus > d.gpus_per_node;
  const double alpha = a2a_alpha_s(sc);
  // a ZeRO collective over the N ranks of a node: the calibrated NCCL curve at the size of one call (its latency in
  // it) when the profile has one for N, else the datasheet ring plus alpha per call
  const Calibration& cc = sc.hw.calibrated;
  auto zero_collective = [&](const std::vector<std::pair<std::int64_t, Curve>>& curves, double total, double call,
                             double calls) -> core::seconds_t {
    if (N <= 1) return 0;
    if (const Curve* c = sc.hw.has_calibration && !zero_spans ? find_curve(curves, d.zero_group) : nullptr)
      return (N - 1) / N * total / (c->at(call) * kGBps);
    return ring_time_s(sc, N, total, zero_spans) + alpha * calls;
  };
  // a call's size: a gather fetches a module's parameters and prefetches up to stage3_prefetch_bucket_size elements
  // (DeepSpeed 0.19.8 zero/config.py 222: 5e7), so at most that many bf16 of a layer's; a reduction, the bucket's
  const double gather_bytes = 2 * std::min(static_cast<double>(d.params.per_layer()), kZero3PrefetchBucketElems);
  const double bucket_bytes = grad_bytes * std::min(pl.reduce_bucket_size, Pn);
  core::seconds_t allgather = 0, reduce_scatter = 0, allreduce = 0;
  // our runtime's parameters: all, one layer's, and the outer tensors' (embedding, final norm, lm_head)
  const StepParamCounts all = ulysses_param_counts(d, sc.model.tied_embeddings, sc.model.qk_norm);
  const StepParamCounts layer = ulysses_layer_param_counts(d, sc.model.qk_norm);
  const double outer = static_cast<double>(all.total() - d.L * layer.total());
  if (ours && pl.zero_stage >= 3) {
    // our runtime (runtime/cuda/step_runner.cpp step): the embedding, final norm and lm_head gathered once per
    // step and their gradients reduce-scattered once after the embedding's backward; each layer gathered before its
    // forward and, but for the last two (still in their slots), again before its recompute and backward, its
    // gradients reduce-scattered after it; one NCCL call per tensor (zero3.cpp), the gradients in their types (bf16
    // matrices, fp32 norms and embedding). On one rank (offload_params over OneRank) the gathers run in place and
    // the gradients are their own parts: nothing (zero_collective's N = 1).
    const double per_layer = sc.model.qk_norm ? 11 : 9, outer_calls = sc.model.tied_embeddings ? 2 : 3;
    const double layer_bytes = 2 * static_cast<double>(layer.total());
    const double layer_gathers = L + std::max(0.0, L - 2);
    allgather = zero_collective(cc.allgather_busbw_GBps, layer_gathers * layer_bytes + 2 * outer, layer_bytes / per_layer,
                                layer_gathers * per_layer + outer_calls);
    reduce_scatter = zero_collective(cc.reduce_scatter_busbw_GBps, static_cast<double>(all.grad_bytes()),
                                     static_cast<double>(layer.grad_bytes()) / per_layer, L * per_layer + outer_calls);
  } else if (pl.zero_stage >= 3) {  // params gathered in forward and again in backward
    allgather = 2 * zero_collective(cc.allgather_busbw_GBps, 2 * Pn, gather_bytes, L + 2);
  } else if (pl.zero_stage >= 1) {  // updated bf16 params gathered after the step
    allgather = zero_collective(cc.allgather_busbw_GBps, 2 * Pn, 2 * Pn, 1);
  }
  if (ours && pl.zero_stage >= 3) {
    if (R > 1) allreduce = 2 * ring_time_s(sc, R, grad_bytes * std::ceil(Pn / N), world_spans) + alpha;
  } else if (pl.zero_stage >= 1) {
    reduce_scatter = zero_collective(cc.reduce_scatter_busbw_GBps, grad_bytes * Pn, bucket_bytes, L);
    if (R > 1) allreduce = 2 * ring_time_s(sc, R, grad_bytes * std::ceil(Pn / N), world_spans) + alpha;
  } else if (G > 1) {  // stage 0: all-reduce of the full gradients over every rank
    allreduce = 2 * ring_time_s(sc, G, grad_bytes * Pn, world_spans) + alpha * L;
  }
  step.add(core::kZeroAllgather.data(), allgather);
  step.add(core::kZeroReduceScatter.data(), reduce_scatter);
  step.add("dp.allreduce", allreduce);

  // --- offload transfers over the host link (per GPU; not overlapped, but for the checkpoints' copies and our
  // runtime's parameter fetches ahead)
  const double th = T * d.h * 2;
  const bool ck_off = ck && pl.offload_checkpoints;
  const double local_params = pl.zero_stage >= 1 ? std::ceil(Pn / N) : Pn;
  const bool params_off = pl.offload_params && pl.zero_stage >= 3;
  const core::seconds_t h2d = th / (host_h2d_GBps(sc) * kGBps);
  // a checkpoint goes out on a copy stream the compute stream does not wait for, overlapping the next layer's
  // forward: only a copy longer than that shows (ours: runtime/cuda/step_runner.cpp `copy_checkpoint`, layers
  // 0..L-2; the PyTorch stack's hook: runtime/deepspeed/ulysses_worker/offload.py 37-43, every layer, issued after its own forward)
  const core::seconds_t layer_fwd = at(core::BlockPhase::attn_fwd) + g.qkv + g.o + g.mlp;
  const core::seconds_t layer_bwd = at(core::BlockPhase::attn_bwd) + g.qkv_bwd + g.o_bwd + g.mlp_bwd + (ck ? layer_fwd : 0);
  const core::seconds_t d2h_busy = th / (host_d2h_busy_GBps(sc) * kGBps);
  if (ours) {  // and back on the copy stream, overlapping the layer before's recompute and backward
    const core::seconds_t h2d_busy = th / (host_h2d_busy_GBps(sc) * kGBps);
    step.add("offload.ckpt.d2h", ck_off ? (L - 1) * std::max(0.0, d2h_busy - layer_fwd) : 0);
    step.add("offload.ckpt.h2d", ck_off ? (L - 1) * std::max(0.0, h2d_busy - layer_bwd) : 0);
  } else {  // the hook's copy back runs on the compute stream (offload.py 49-51): all of it shows
    step.add("offload.ckpt.d2h", ck_off ? L * std::max(0.0, d2h_busy - layer_fwd) : 0);
    step.add("offload.ckpt.h2d", ck_off ? L * h2d : 0);
  }
  // the optimizer and ZeRO-3's work around it: measured per parameter when the profile has it
  // (calibrate --backend deepspeed's op bench), else from bytes and rates (docs/MODEL.md)
  const Calibration& cal = sc.hw.calibrated;
  const bool cal_on = sc.hw.has_calibration;
  const bool ds_zero3 = pl.zero_stage >= 3 && pl.runtime == Runtime::pytorch;
  const auto measured = [&](double s_per_param) { return ds_zero3 && cal_on && s_per_param > 0; };
  const double procs = static_cast<double>(d.gpus_on_node);  // processes sharing a node's host cores
  // gradient partitions to the host in the backward (DeepSpeed: inside the reduce, stage3.py partition_grads, at
  // any sp the partition is bf16 by then, 1940-1941): copied into its pinned host buffer (2025, 2 B), that buffer
  // back to the GPU (2028, 2 B), there made fp32 and copied into the host's fp32 gradients (1456, 4 B): 6 B to the
  // host and 2 B back per parameter. Ours copies each gradient as the step holds it after the backward (bf16,
  // fp32 for the embedding and norms), one way.
  double offload_grad_s_per_param = (6 / host_d2h_GBps(sc) + 2 / host_h2d_GBps(sc)) / kGBps;
  if (ours) {
    offload_grad_s_per_param = static_cast<double>(all.grad_bytes()) / static_cast<double>(all.total()) / (host_d2h_GBps(sc) * kGBps);
  }
  step.add(core::kOffloadGrads.data(), !pl.offload_optimizer ? 0
                            : measured(cal.zero3_offload_grads_s_per_param)
                                ? local_params * cal.zero3_offload_grads_s_per_param
                                : local_params * offload_grad_s_per_param);
  // the updated bf16 partition back to the GPU (inside a measured offload step already)
  step.add(core::kOffloadOptimizer.data(), pl.offload_optimizer && !params_off && !measured(cal.zero3_offload_step_s_per_param)
                                    ? local_params * 2 / (host_h2d_GBps(sc) * kGBps)
                                    : 0);
  // the parameter parts from the host before each gather: DeepSpeed's twice per step, whole; ours (runtime/cuda/
  // zero3.cpp fetch, step_runner.cpp gather) as its gathers, those ahead on a stream of their own, showing only what
  // the layer they overlap does not hide (sim/param_fetch.hpp)
  core::seconds_t fetch = 2 * local_params * 2 / (host_h2d_GBps(sc) * kGBps);
  if (ours) {
    ParamFetch f;
    f.L = d.L;
    f.embed_bytes = 2 * static_cast<double>(d.V) * d.h / N;
    f.rest_bytes = 2 * outer / N - f.embed_bytes;
    f.layer_bytes = 2 * static_cast<double>(layer.total()) / N;
    f.idle_Bps = host_h2d_GBps(sc) * kGBps, f.busy_Bps = host_h2d_busy_GBps(sc) * kGBps;
    f.layer_fwd = layer_fwd, f.layer_bwd = layer_bwd;
    f.ckpt_bwd_bytes = ck_off ? th : 0;
    fetch = ulysses_param_fetch_s(f);
  }
  step.add(core::kOffloadParams.data(), params_off ? fetch : 0);
  core::seconds_t opt = 0;
  if (ours && !pl.offload_optimizer) {  // runtime/cuda/optimizer.cpp: AdamW on the GPU over this rank's share
    opt = ulysses_optimizer_s(sc, d) * local_params / Pn;
  } else if (pl.offload_optimizer) {
    if (measured(cal.zero3_offload_step_s_per_param)) {
      opt = local_params * procs * cal.zero3_offload_step_s_per_param;
    } else {
      // the host optimizer's measured rate (DeepSpeedCPUAdam's, or ours: runtime/host_adam.cpp), else the
      // stated throughput
      const double measured_rate = ours ? cal.ulysses_host_adam_s_per_param : cal.cpu_adam_s_per_param;
      const double cpu_adam = cal_on && measured_rate > 0 ? measured_rate : 1.0 / kHostAdamParamsPerS;
      opt = local_params * procs * cpu_adam;
    }
  } else if (pl.torch_adam && measured(cal.zero3_torch_adamw_step_s_per_param)) {
    opt = local_params * cal.zero3_torch_adamw_step_s_per_param;
  } else if (!pl.torch_adam && measured(cal.zero3_fused_adam_step_s_per_param)) {
    opt = local_params * cal.zero3_fused_adam_step_s_per_param;
  } else {
    // ZeRO-3's own passes around the optimizer on the GPU: gradient norm, flat fp32 gradient,
    // unscale/clip, fp32 -> bf16 parameters (kZero3StepBytesPerParam, docs/MODEL.md)
    const double zero3_passes = ds_zero3 ? local_params * kZero3StepBytesPerParam / (sc.hw.hbm_GBps * kGBps) : 0;
    opt = zero3_passes + (pl.torch_adam && cal_on && cal.torch_adamw_s_per_param > 0
                              ? local_params * cal.torch_adamw_s_per_param
                              : local_params * kAdamBytesPerParam / (sc.hw.hbm_GBps * kGBps));
  }
  step.add(core::kOptimizerStep.data(), opt);

  // --- FLOPs executed per GPU (causal halved, recompute counted)
  const double attn = core::attention_flops(d.B, d.S, d.H_l, d.D, d.causal);
  const double layer_gemm = g.flops_qkv + g.flops_o;
  const double fwd_passes = 1 + (ck ? 1 : 0);
  // the MLP's reruns: a whole forward (HF, DeepSpeed's TiledMLP) or gate and up only (ours: 2 of its 3 GEMMs)
  const double mlp_rerun_share = ours ? 2.0 / 3.0 : 1.0;
  const double mlp_reruns = mlp_rerun_share * ((ck && !(ours && tm) ? 1 : 0) + (tm ? 1 : 0));
  double flops = L * (attn * (fwd_passes + core::kAttnBwdFlopsFactor) + layer_gemm * (fwd_passes + 2) +
                      g.flops_mlp * (1 + mlp_reruns + 2));
  flops += 3 * 2 * T * d.h * static_cast<double>(d.V);  // logits fwd + bwd
  return flops;
}

}  // namespace ulysses
