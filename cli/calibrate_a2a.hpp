#pragma once
// The exchange part of `ulysses calibrate --backend cuda`: from the block's exchange phases
// measured at several sizes to the profile's curves (no GPU code here, so stored raw
// measurements can be re-derived anywhere: `calibrate --from-raw`).
//
// For each sample (X = q bytes per rank, B = 1.5 X the q,k,v bytes of the 32/8/128 shape):
//   launches_k = exchange_launches(transport, tensors_k)     (sim/timing.hpp: p2p 1, nccl tensors_k)
//   GBps_k(b_k) = b_k / (t_k - launches_k * alpha)           -> a2a_phase_GBps "<phase>@p<P>"
//   busbw(X)    = (P-1)/P * X / (t(a2a.out.bwd) - alpha - 2X/pack)   (the generic formula's curve)
// so that sim/timing.cpp's exchange_phase_s reproduces every measured t_k exactly.
#include <array>
#include <ostream>
#include <string>
#include <vector>

#include "sim/scenario.hpp"

namespace ulysses::cli {

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

// A raw calibration file (`calibrate --backend cuda --json`), read and checked: every key's type
// and range, one InputError naming the file and key (a2a[3].q_bytes_per_rank: ...).
struct CalibrationRaw {
  std::string path, transport = "nccl", measured_at = "?";
  std::vector<double> idle_ms, idle_t_s;  // "a2a_idle" samples (empty: none), T = 0 first
  int P = 0;
  std::vector<A2aSample> samples;         // "a2a" samples (empty: none), one P, sizes increasing
};
CalibrationRaw read_calibration_raw(const std::string& path);
// Re-derives c's idle-link and exchange curves from raw (c needs a2a_alpha_per_tensor_s >= 0 and
// pack_GBps > 0 when raw has exchange samples); appends to c.provenance naming cmd; says what it
// derived on out.
void apply_calibration_raw(const CalibrationRaw& raw, const std::string& cmd, Calibration& c, std::ostream& out);

// `ulysses calibrate --from-raw FILE --profile P [--profile-out OUT]`: re-derives the exchange
// curves (from "a2a" samples) and/or the idle-link penalty curve (from "a2a_idle" samples) of a
// profile's calibrated section from the raw JSON that `calibrate --json` stored.
int run_calibrate_from_raw(int argc, char** argv);

}  // namespace ulysses::cli
