// The Ulysses attention block's six phases (sim/timing.hpp `block_times`; docs/MODEL.md "All-to-all", "Attention"):
// its exchanges (calibrated per-phase curves, else alpha + bytes over the link + pack copies) and attention (FLOPs at
// the calibrated efficiency curve of the shape, else the datasheet's).
#include <algorithm>
#include <cmath>

#include "core/flops.hpp"
#include "sim/attn_key.hpp"
#include "sim/timing.hpp"
#include "sim/timing_shared.hpp"

namespace ulysses {

using namespace timing_detail;

core::seconds_t a2a_alpha_s(const Scenario& sc) {
  const Calibration& c = sc.hw.calibrated;
  return sc.hw.has_calibration && c.a2a_alpha_s >= 0 ? c.a2a_alpha_s : sc.hw.a2a_alpha_s;
}

double a2a_busbw_GBps(const Scenario& sc, const Dims& d, double bytes_per_rank) {
  const Curve* c = sc.hw.has_calibration ? find_curve(sc.hw.calibrated.a2a_busbw_GBps, d.P) : nullptr;
  double busbw = c ? c->at(bytes_per_rank) : sc.hw.a2a_link_eff * sc.hw.nvlink_GBps;
  if (d.P > d.gpus_per_node) {
    // (P - g) of the P-1 peers are off-node: that share of the bytes crosses the NIC.
    const double off = static_cast<double>(d.P - d.gpus_per_node) / static_cast<double>(d.P - 1);
    busbw = std::min(busbw, sc.hw.a2a_link_eff * sc.hw.nic_GBps / off);
  }
  return busbw;
}

core::seconds_t a2a_time_s(const Scenario& sc, const Dims& d, double bytes_per_rank) {
  return a2a_time_s(sc, d, bytes_per_rank, 1);
}

core::seconds_t a2a_time_s(const Scenario& sc, const Dims& d, double bytes_per_rank, int tensors) {
  if (d.P <= 1) return 0;
  const double P = static_cast<double>(d.P);
  const Calibration& c = sc.hw.calibrated;
  const double wire = (P - 1) / P * bytes_per_rank / (a2a_busbw_GBps(sc, d, bytes_per_rank) * kGBps);
  // pack and unpack are copies (read + write = 2x bytes); for B = 1 one side is the identity
  const double copies = (d.B == 1 ? 1 : 2) * 2 * bytes_per_rank / (copy_GBps(sc) * kGBps);
  const core::seconds_t alpha = sc.hw.has_calibration && c.a2a_alpha_per_tensor_s >= 0 ? tensors * c.a2a_alpha_per_tensor_s
                                                                                  : a2a_alpha_s(sc);
  return alpha + wire + copies;
}


namespace {

// The most specific calibrated curve for this shape (sim/attn_key.hpp): curves filed for the
// head dim and mask, and per heads-per-rank interpolated linearly in log(H_l) between the two
// nearest (clamped outside); else the head dim and mask without H_l; else the bare
// implementation name. Returns < 0 when no curve applies.
// The two curves of a family (per heads or per kv heads) nearest to n, below and above.
struct Bracket {
  const Curve *lo = nullptr, *hi = nullptr;
  std::int64_t n_lo = 0, n_hi = 0;
  void offer(const Curve& c, std::int64_t key_n, std::int64_t n) {
    if (key_n <= n && (!lo || key_n > n_lo)) lo = &c, n_lo = key_n;
    if (key_n >= n && (!hi || key_n < n_hi)) hi = &c, n_hi = key_n;
  }
  bool any() const { return lo || hi; }
  // linear in log(n) between the two; the nearest one outside their range
  double at(std::int64_t n, double S) const {
    if (!(lo && hi) || n_lo == n_hi) return (lo ? lo : hi)->at(S);
    const double t = (std::log(double(n)) - std::log(double(n_lo))) / (std::log(double(n_hi)) - std::log(double(n_lo)));
    return lo->at(S) + t * (hi->at(S) - lo->at(S));
  }
};

// The most specific calibrated curve for this shape (sim/attn_key.hpp): curves filed for the
// head dim and mask per kv heads per rank (.kv<n>), else per query heads per rank (.h<n>), each
// interpolated in log(n) between the two nearest; else the head dim and mask alone; else the
// bare implementation name. Returns < 0 when no curve applies.
double keyed_attn_eff(const std::vector<std::pair<std::string, Curve>>& curves, const std::string& impl,
                      std::int64_t D, bool causal, std::int64_t h_local, std::int64_t kv_local, double S) {
  const Curve *shape = nullptr, *bare = nullptr;
  Bracket by_h, by_kv;
  for (const auto& [key, c] : curves) {
    // cheap reject first: the key must start with "<impl>" followed by nothing or '@'
    if (c.empty() || key.size() < impl.size() || (key.size() > impl.size() && key[impl.size()] != '@') ||
        (!impl.empty() && key[0] != impl[0]) || key.compare(0, impl.size(), impl) != 0)
      continue;
    if (key.size() == impl.size() && !impl.empty()) { bare = &c; continue; }  // the bare name (what parsing finds)
    AttnCurveKey k;
    if (!parse_attn_curve_key(key, k) || k.impl != impl) continue;
    if (k.D == 0) { bare = &c; continue; }
    if (k.D != D || k.causal != (causal ? 1 : 0)) continue;
    if (k.kv_local > 0) by_kv.offer(c, k.kv_local, kv_local);
    else if (k.h_local > 0) by_h.offer(c, k.h_local, h_local);
    else shape = &c;
  }
  if (by_kv.any()) return by_kv.at(kv_local, S);
  if (by_h.any()) return by_h.at(h_local, S);
  if (shape) return shape->at(S);
  return bare ? bare->at(S) : -1;
}

}  // namespace

double attn_eff(const Scenario& sc, bool forward, double S) {
  const Calibration& c = sc.hw.calibrated;
  const std::int64_t P = std::max<std::int64_t>(sc.plan.sp_size, 1);
  const std::int64_t kv_local = std::max(sc.model.kv_heads, P) / P;  // after replication (Dims::kv_local)
  const double eff = sc.hw.has_calibration
                         ? keyed_attn_eff(forward ? c.attn_fwd_eff : c.attn_bwd_eff, sc.plan.attn_implementation,
                                          sc.model.head_dim, sc.workload.causal, sc.model.heads / P, kv_local, S)
                         : -1;
  return eff > 0 ? eff : (forward ? sc.hw.attn_fwd_eff : sc.hw.attn_bwd_eff);
}


core::seconds_t qkv_exchange_s(const Scenario& sc, const Dims& d, bool grouped) {
  if (d.P <= 1) return 0;
  const double T = tokens(d);
  const double q = T * d.H * d.D * 2, kv = T * d.kv_wire * d.D * 2;
  // kv replica: read k (H_kv heads), write the replica (P heads), for k and v; the backward
  // sums the replica gradients back (same bytes)
  const double replica = d.kv_replica ? 2 * (T * d.H_kv * d.D * 2 + T * d.P * d.D * 2) / (copy_GBps(sc) * kGBps) : 0;
  const core::seconds_t x = grouped ? a2a_time_s(sc, d, q + 2 * kv, 3) : a2a_time_s(sc, d, q, 1) + 2 * a2a_time_s(sc, d, kv, 1);
  return x + replica;
}

namespace {

// The calibrated exchange-phase curves for sp size P (Calibration::a2a_phase_GBps), indexed by
// BlockPhase: for each exchange phase the first curve filed for it, all four in one scan of the list.
void phase_curves(const Scenario& sc, std::int64_t P, const Curve* (&out)[6]) {
  if (!sc.hw.has_calibration) return;
  constexpr core::BlockPhase kExchanges[] = {core::BlockPhase::a2a_qkv_fwd, core::BlockPhase::a2a_out_fwd,
                                             core::BlockPhase::a2a_out_bwd, core::BlockPhase::a2a_qkv_bwd};
  for (const auto& [key, c] : sc.hw.calibrated.a2a_phase_GBps) {
    std::string_view ph;
    std::int64_t p = 0;
    if (c.empty() || !parse_a2a_phase_key(key, ph, p) || p != P) continue;
    for (core::BlockPhase x : kExchanges) {
      const Curve*& slot = out[static_cast<int>(x)];
      if (!slot && ph == name(x)) slot = &c;
    }
  }
}

}  // namespace

int exchange_launches(const Calibration& c, int tensors) { return c.a2a_transport == "p2p" ? 1 : tensors; }

core::seconds_t exchange_idle_penalty_s(const Scenario& sc, const Dims& d, core::seconds_t idle_s) {
  const Curve& c = sc.hw.calibrated.a2a_idle_penalty_us;
  if (d.P <= 1 || !sc.hw.has_calibration || c.empty() || !(idle_s > 0)) return 0;
  return c.at(idle_s * 1e3) * 1e-6;  // x in ms, y in us
}

namespace {

// The generic exchange formula for one shape (bytes per rank, tensors), evaluated at most once:
// the forward and backward phases of the block exchange the same shapes.
struct GenericExchange {
  double bytes;
  int tensors;
  bool done = false;
  core::seconds_t t = 0;
  core::seconds_t time_s(const Scenario& sc, const Dims& d) {
    if (!done) t = a2a_time_s(sc, d, bytes, tensors), done = true;
    return t;
  }
};

// One block exchange phase of g.bytes per rank in g.tensors tensors: from its own calibrated
// curve c when present (phase_curves; launches * alpha + bytes / GBps(bytes); launches = 1 for the p2p
// transport's single kernel, else one per tensor), else the generic exchange formula.
core::seconds_t exchange_phase_s(const Scenario& sc, const Dims& d, const Curve* c, GenericExchange& g) {
  // P = 1: nothing moves, but our runtime still copies each tensor once between the two layouts (the
  // single chunk is the tensor in both; one pack or unpack kernel per tensor: runtime/cuda/exchange.cpp
  // Exchanger::run lines 79, 113, 125, 153; docs/MODEL.md "All-to-all"): read + write of every byte at the copy bandwidth
  if (d.P <= 1) return 2 * g.bytes / (copy_GBps(sc) * kGBps);
  if (!c) return g.time_s(sc, d);
  const double bytes = g.bytes;
  const int tensors = g.tensors;
  const double alpha = sc.hw.calibrated.a2a_alpha_per_tensor_s >= 0 ? sc.hw.calibrated.a2a_alpha_per_tensor_s : a2a_alpha_s(sc);
  return exchange_launches(sc.hw.calibrated, tensors) * alpha + bytes / (c->at(bytes) * kGBps);
}

}  // namespace

void block_times(const Scenario& sc, const Dims& d, std::array<core::seconds_t, 6>& block) {
  // `ulysses run` exchanges q, k and v in one grouped exchange (runtime/cuda/exchange.hpp)
  const double T = tokens(d), q = T * d.H * d.D * 2, kv = T * d.kv_wire * d.D * 2;
  // kv replica copies (P > H_kv, replicate): read k (H_kv heads), write the replica (P heads),
  // for k and v; the backward sums the replica gradients back (same bytes)
  const double replica = d.P > 1 && d.kv_replica ? 2 * (T * d.H_kv * d.D * 2 + T * d.P * d.D * 2) / (copy_GBps(sc) * kGBps) : 0;
  const double flops = core::attention_flops(d.B, d.S, d.H_l, d.D, d.causal), peak = sc.hw.bf16_dense_flops, S = static_cast<double>(d.S);
  GenericExchange qkv{q + 2 * kv, 3}, out{q, 1};
  const Curve* curve[6] = {};  // by BlockPhase
  if (d.P > 1) phase_curves(sc, d.P, curve);
  auto exchange = [&](core::BlockPhase p, GenericExchange& g) { return exchange_phase_s(sc, d, curve[static_cast<int>(p)], g); };
  block[static_cast<int>(core::BlockPhase::a2a_qkv_fwd)] = exchange(core::BlockPhase::a2a_qkv_fwd, qkv) + replica;
  block[static_cast<int>(core::BlockPhase::attn_fwd)] = flops / (peak * attn_eff(sc, true, S));
  block[static_cast<int>(core::BlockPhase::a2a_out_fwd)] = exchange(core::BlockPhase::a2a_out_fwd, out);
  block[static_cast<int>(core::BlockPhase::a2a_out_bwd)] = exchange(core::BlockPhase::a2a_out_bwd, out);
  block[static_cast<int>(core::BlockPhase::attn_bwd)] = core::kAttnBwdFlopsFactor * flops / (peak * attn_eff(sc, false, S));
  block[static_cast<int>(core::BlockPhase::a2a_qkv_bwd)] = exchange(core::BlockPhase::a2a_qkv_bwd, qkv) + replica;
  // the exchanges right after attention find the links idle for the attention's duration
  block[static_cast<int>(core::BlockPhase::a2a_out_fwd)] += exchange_idle_penalty_s(sc, d, block[static_cast<int>(core::BlockPhase::attn_fwd)]);
  block[static_cast<int>(core::BlockPhase::a2a_qkv_bwd)] += exchange_idle_penalty_s(sc, d, block[static_cast<int>(core::BlockPhase::attn_bwd)]);
}

}  // namespace ulysses
