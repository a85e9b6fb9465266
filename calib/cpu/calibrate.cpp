// `ulysses calibrate --backend cpu` (calib/cpu/calibrate.hpp): pack, exchange and attention
// measured with calib/cpu/microbench.hpp, fitted to the curves the time model reads.
#include "calib/cpu/calibrate.hpp"

#include <unistd.h>

#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "calib/cpu/microbench.hpp"
#include "reports/format.hpp"
#include "reports/table.hpp"
#include "runtime/cpu/cpu_backend.hpp"
#include "sim/provenance.hpp"
#include "core/errors.hpp"

namespace ulysses::calib::cpu {
namespace {

using runtime::AttnDims;

using reports::utc_now;

std::string host_name() {
  char buf[256] = {};
  return gethostname(buf, sizeof buf - 1) == 0 ? buf : "unknown host";
}

// a2a, as the time model charges it (sim/timing.cpp a2a_time_s, B = 1):
//   t = alpha + (P-1)/P * bytes / busbw(bytes) + 2 * bytes / pack_GBps   (one pack copy)
// alpha: a 4-byte all-to-all at P = 2; t: one seq->head exchange as the block runs it (fresh
// buffers, just-written source, pack + all-to-all); busbw solved from t so the model reproduces
// the measured exchange at every calibration point. The bare all-to-all's busbw is shown beside.
void calibrate_a2a(const Setup& s, const std::vector<std::int64_t>& a2a_bytes, Calibration& c, std::string& out) {
  c.a2a_alpha_s = alltoall_time_s(2, 2 * 2, 5 * s.iters);
  reports::Table t({{"P", ""}, {"bytes/rank", "B"}, {"a2a alone", "us"}, {"busbw", "GB/s"}, {"exchange", "us"},
                    {"copies", "us"}, {"model busbw", "GB/s"}});
  for (std::int64_t P : s.sp_sizes) {
    Curve curve;
    for (std::int64_t bytes : a2a_bytes) {
      const double frac = double(P - 1) / double(P);
      const double bare_s = alltoall_time_s(int(P), bytes, s.iters);
      const double t_s = exchange_time_s(int(P), bytes, s.iters);
      const double copies_s = 2.0 * double(bytes) / (c.pack_GBps * 1e9);
      // a point where alpha + copies already explain the exchange is noise-dominated: fall back
      // to the bare all-to-all's wire time there
      const double wire_s = t_s - c.a2a_alpha_s - copies_s;
      const double model = frac * double(bytes) /
                           (wire_s >= 0.25 * t_s ? wire_s : std::max(bare_s - c.a2a_alpha_s, 0.5 * bare_s)) / 1e9;
      curve.points.emplace_back(double(bytes), model);
      t.add_row({fmt::format("{}", P), fmt::format("{}", bytes), fmt::format("{:.1f}", bare_s * 1e6),
                 fmt::format("{:.2f}", frac * double(bytes) / bare_s / 1e9), fmt::format("{:.1f}", t_s * 1e6),
                 fmt::format("{:.1f}", copies_s * 1e6), fmt::format("{:.2f}", model)});
    }
    c.a2a_busbw_GBps.emplace_back(P, curve);
  }
  out += fmt::format("all-to-all (alpha = {:.1f} us: a 4-byte exchange at P = 2; exchange = pack + all-to-all as in "
                     "the block; model busbw = (P-1)/P * bytes / (exchange - alpha - copies))\n",
                     c.a2a_alpha_s * 1e6) +
         t.render();
}

// The curve key of sim/attn_key.hpp: <impl>@d<D>.<causal|full>.h<H_l>.
std::string attn_key(const std::string& impl, const AttnDims& a) {
  return fmt::format("{}@d{}.{}.h{}", impl, a.D, a.causal ? "causal" : "full", a.H);
}

// Attention efficiency vs S, forward and backward, for the configured shape (filed under the bare
// implementation name, which any shape falls back to, and under its shape key) and, unless quick,
// for head dims 64 and 128 with and without the causal mask at the same heads per rank (filed
// under their shape keys; fewer, shorter points, one iteration each).
void calibrate_attention(const Setup& s, const HardwareProfile& hw, Calibration& c, std::string& out) {
  reports::Table t({{"curve", "", reports::Align::left}, {"S", ""}, {"fwd", "us"}, {"bwd", "us"}, {"fwd", "GFLOP/s"},
                    {"bwd", "GFLOP/s"}, {"fwd eff", ""}, {"bwd eff", ""}});
  auto measure = [&](const AttnDims& shape, const std::vector<std::int64_t>& S_list, int iters, bool also_bare) {
    Curve fwd, bwd;
    for (std::int64_t S : S_list) {
      AttnDims a = shape;
      a.S = S;
      const auto tm = attention_time_s(a, s.threads, iters);
      const double ff = runtime::attention_fwd_flops(a) / tm.fwd_s, fb = runtime::attention_bwd_flops(a) / tm.bwd_s;
      const double ef = ff / hw.bf16_dense_flops, eb = fb / hw.bf16_dense_flops;
      if (ef > 1 || eb > 1)
        throw core::InputError(hw.name, "bf16_dense_TFLOPs",
                         fmt::format("the measured attention rate ({:.1f} GFLOP/s per thread) exceeds the profile's peak; "
                                     "raise the peak so that efficiencies are fractions",
                                     std::max(ff, fb) / 1e9));
      fwd.points.emplace_back(double(S), ef);
      bwd.points.emplace_back(double(S), eb);
      t.add_row({attn_key(s.impl, shape), fmt::format("{}", S), fmt::format("{:.0f}", tm.fwd_s * 1e6),
                 fmt::format("{:.0f}", tm.bwd_s * 1e6), fmt::format("{:.2f}", ff / 1e9), fmt::format("{:.2f}", fb / 1e9),
                 fmt::format("{:.3f}", ef), fmt::format("{:.3f}", eb)});
    }
    if (also_bare) c.attn_fwd_eff.emplace_back(s.impl, fwd), c.attn_bwd_eff.emplace_back(s.impl, bwd);
    c.attn_fwd_eff.emplace_back(attn_key(s.impl, shape), fwd);
    c.attn_bwd_eff.emplace_back(attn_key(s.impl, shape), bwd);
  };
  const AttnDims primary{1, 0, s.heads, s.kv_heads, s.head_dim, s.causal};
  // attention: median of 5 (a load blip on a shared host skews fewer)
  measure(primary, s.quick ? std::vector<std::int64_t>{128, 256} : std::vector<std::int64_t>{256, 512, 1024, 2048},
          s.quick ? 1 : 5, true);
  if (!s.quick)
    for (std::int64_t D : {64, 128})
      for (bool causal : {true, false}) {
        const AttnDims shape{1, 0, s.heads, s.kv_heads, D, causal};
        if (D != primary.D || causal != primary.causal) measure(shape, {256, 512, 1024}, 1, false);
      }
  out += fmt::format("\nattention '{}' per thread, {} threads at once, B=1 H_l={} H_kv_l={} (eff = of {:.1f} GFLOP/s)\n",
                     s.impl, s.threads, s.heads, s.kv_heads, hw.bf16_dense_flops / 1e9) +
         t.render();
}

}  // namespace

Result calibrate(const Setup& s, const HardwareProfile& hw, const std::string& command) {
  const std::int64_t pack_bytes = 1 << 20;
  const std::vector<std::int64_t> a2a_bytes = s.quick ? std::vector<std::int64_t>{16 << 10, 256 << 10}
                                                      : std::vector<std::int64_t>{16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20};
  Result r;
  Calibration& c = r.c;
  std::string& out = r.report;
  c.pack_GBps = pack_GBps(pack_bytes, s.threads, s.iters);
  out += fmt::format("pack (seq->head, {} B per thread, {} threads at once): {:.2f} GB/s (read + write)\n\n", pack_bytes,
                     s.threads, c.pack_GBps);
  calibrate_a2a(s, a2a_bytes, c, out);
  calibrate_attention(s, hw, c, out);
  set_provenance(c.provenance, "cpu", fmt::format(
      "measured {} on host {} ({}, {} hardware threads) by `{}`; a2a: median over {} iterations of the max over P "
      "thread-ranks, busbw = (P-1)/P * bytes / (t - alpha - 2 * bytes / pack_GBps) with t a pack + all-to-all as in the block; attention '{}': B=1 H_l={} H_kv_l={} D={} {} on {} threads at "
      "once, eff = FLOPs / t / bf16_dense_flops of profile {} ({:.1f} GFLOP/s); pack: {} B per thread on {} threads",
      utc_now(), host_name(), runtime::cpu::host_cpu_model(), std::thread::hardware_concurrency(), command,
      s.iters, s.impl, s.heads, s.kv_heads, s.head_dim, s.causal ? "causal" : "non-causal", s.threads, hw.name,
      hw.bf16_dense_flops / 1e9, pack_bytes, s.threads));
  return r;
}

}  // namespace ulysses::calib::cpu
