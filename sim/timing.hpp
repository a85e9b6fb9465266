#pragma once
// Time model: seconds per phase of one optimizer step (all L layers) and of one layer's
// Ulysses attention block. Formulas and assumptions: docs/MODEL.md "Time".
// Nothing overlaps (conservative): step time = sum of the phases.
#include <array>

#include "sim/gemm_key.hpp"
#include "sim/memory.hpp"
#include "sim/prediction.hpp"
#include "sim/scenario.hpp"

namespace ulysses {

// Stated constants (docs/MODEL.md "Assumptions"); not fitted to any published result.
inline constexpr double kAdamBytesPerParam = 30;         // fused Adam traffic per parameter
inline constexpr double kHostAdamParamsPerS = 3e9;       // CPU Adam throughput per node (all processes)
// DeepSpeed ZeRO-3 step() passes over each parameter on the GPU besides the optimizer's own (stage3.py):
// norm of the bf16 gradient as fp32 10 + flat fp32 gradient 10 + unscale 8 + fp32 -> bf16 copy 6
inline constexpr double kZero3StepBytesPerParam = 34;

// --- building blocks (exposed for tests) ---
double a2a_busbw_GBps(const Scenario& sc, const Dims& d, double bytes_per_rank);
core::seconds_t a2a_alpha_s(const Scenario& sc);
// One exchange of a tensor of bytes_per_rank: alpha + (P-1)/P*bytes/busbw + pack/unpack copies.
core::seconds_t a2a_time_s(const Scenario& sc, const Dims& d, double bytes_per_rank);
// Same for an exchange of `tensors` tensors (fixed cost per tensor when calibrated:
// Calibration::a2a_alpha_per_tensor_s). block_times prefers the calibrated per-phase curves.
core::seconds_t a2a_time_s(const Scenario& sc, const Dims& d, double bytes_per_rank, int tensors);
// Fixed costs (alphas) of one block exchange phase of `tensors` tensors under the calibrated
// transport: 1 for "p2p" (one kernel), else `tensors` (one NCCL send/recv per tensor and peer).
int exchange_launches(const Calibration& c, int tensors);
// Extra time of an exchange phase that follows idle_s of computation without NVLink traffic
// (Calibration::a2a_idle_penalty_us; 0 when not calibrated or P = 1).
core::seconds_t exchange_idle_penalty_s(const Scenario& sc, const Dims& d, core::seconds_t idle_s);

// The host link device -> host while the GPU computes (the checkpoint copies that overlap the layers), GB/s: the
// calibrated rate, else the idle link's calibrated rate, else the profile's host_link_GBps.
double host_d2h_busy_GBps(const Scenario& sc);
double attn_eff(const Scenario& sc, bool forward, double S);
double gemm_eff(const Scenario& sc, double mnk);
// Y[M, N] = X[M, K] W[N, K]^T or one of its backward passes (sim/gemm_key.hpp): 2 M N K FLOPs at the
// efficiency of our runtime's calibrated curve for that pass and shape (plan.runtime ulysses), else gemm_eff.
core::seconds_t gemm_time_s(const Scenario& sc, double M, double N, double K, GemmPass pass = GemmPass::fwd);

// q, k, v exchange (+ kv replica copies): grouped = one exchange of all three (`ulysses run`),
// else three all-to-alls (DeepSpeed's Ulysses layer, used in the step).
core::seconds_t qkv_exchange_s(const Scenario& sc, const Dims& d, bool grouped);
// The six block phases of one layer (indexed by BlockPhase), forward and backward once.
void block_times(const Scenario& sc, const Dims& d, std::array<core::seconds_t, 6>& block);
// Every step phase (docs/DESIGN.md names), in a fixed order, given this scenario's block_times();
// returns FLOPs executed per GPU.
double step_times(const Scenario& sc, const Dims& d, const std::array<core::seconds_t, 6>& block, PhaseTimes& step);

}  // namespace ulysses
