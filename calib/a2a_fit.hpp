#pragma once
// Exchange curve fitting: from the block's exchange phases measured at several sizes to the
// profile's curves (pure arithmetic, no GPU code, so stored raw measurements can be re-derived
// anywhere: calib/raw_file.hpp, `calibrate --from-raw`).
//
// For each sample (X = q bytes per rank, B = 1.5 X the q,k,v bytes of the 32/8/128 shape):
//   launches_k = exchange_launches(transport, tensors_k)     (sim/timing.hpp: p2p 1, nccl tensors_k)
//   GBps_k(b_k) = b_k / (t_k - launches_k * alpha)           -> a2a_phase_GBps "<phase>@p<P>"
//   busbw(X)    = (P-1)/P * X / (t(a2a.out.bwd) - alpha - 2X/pack)   (the generic formula's curve)
// so that sim/timing.cpp's exchange_phase_s reproduces every measured t_k exactly.
#include <array>
#include <string>
#include <vector>

#include "sim/scenario.hpp"

namespace ulysses::calib {

// The block's exchange phases (BlockPhase 0, 2, 3, 5: a2a.qkv.fwd, a2a.out.fwd, a2a.out.bwd, a2a.qkv.bwd).
inline constexpr std::array<int, 4> kExchangePhases = {0, 2, 3, 5};

struct A2aSample {
  double q_bytes = 0;                // X, q bytes per rank
  double qkv_bytes = 0;              // q + k + v bytes per rank
  std::array<double, 6> t_s{};       // per block phase (docs/DESIGN.md order), seconds; attention entries unused
};

struct A2aDerived {
  std::array<std::vector<double>, 6> GBps;  // per phase, per sample
  std::vector<double> busbw_GBps;           // per sample
};

// Replaces c's exchange curves of sp size P (a2a_phase_GBps "<phase>@p<P>", a2a_busbw_GBps[P])
// and sets c.a2a_transport. Needs c.a2a_alpha_per_tensor_s >= 0 and c.pack_GBps > 0.
A2aDerived derive_a2a_curves(int P, const std::vector<A2aSample>& samples, const std::string& transport, Calibration& c);

// Exchange after idle links: times t(T) of one exchange after T ms without NVLink traffic, T = 0
// first: penalty(T) = max(0, t(T) - t(0)) for T > 0 -> c.a2a_idle_penalty_us (x ms, y us).
void derive_a2a_idle_curve(const std::vector<double>& idle_ms, const std::vector<double>& t_s, Calibration& c);

}  // namespace ulysses::calib
