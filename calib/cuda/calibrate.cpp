// `ulysses calibrate --backend cuda` (calib/cuda/calibrate.hpp): microbenchmarks on the GPU host
// fitted to the `calibrated:` section of a hardware profile (written by calib/profile_out.hpp):
//   - attention efficiency vs S for each CUDA kernel (ulysses_flash, ulysses_reference), filed per
//     head dim, mask and heads per rank (sim/attn_key.hpp keys): the forward per query heads per
//     rank (ulysses_flash@d128.causal.h16), the flash backward per kv heads per rank (its grid
//     runs over kv heads: ulysses_flash@d128.causal.kv4); eff = FLOPs / time / bf16_dense_flops;
//   - the block's exchange phases for each sp size the host has (2 GPUs: P = 2), as they run in
//     the block (calibrate_a2a below, fitted by calib/a2a_fit.hpp): alpha per tensor and one
//     effective-bandwidth curve per exchange phase, plus the generic busbw curve;
//   - the spread of attention time between the GPUs (shown only);
//   - pack bandwidth, pinned host<->device copies, fixed device memory (context with the block's
//     kernels loaded: profile HBM - free; NCCL: free before - free after the communicators);
//   - our runtime's elementwise kernels alone (calib/cuda/kernel_rates.hpp), the optimizer on the host
//     (calib/host_adam_rate.hpp) and our cuBLASLt GEMMs per pass and shape (calib/cuda/gemm_rates.hpp): the
//     step model's rates for plan.runtime ulysses.
// PyTorch's GEMMs (gemm_eff) are not calibrated by this command: the deepspeed backend's op bench does that.
#include "calib/cuda/calibrate.hpp"

#include <algorithm>
#include <array>
#include <iostream>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "calib/a2a_fit.hpp"
#include "calib/point_clocks.hpp"
#include "calib/cuda/collectives.hpp"
#include "calib/cuda/host_link_busy.hpp"
#include "calib/host_adam_rate.hpp"
#include "calib/cuda/gemm_rates.hpp"
#include "calib/cuda/kernel_rates.hpp"
#include "calib/cuda/microbench.hpp"
#include "kernels/attention_flash.hpp"
#include "reports/format.hpp"
#include "reports/table.hpp"
#include "runtime/cuda/cuda_backend.hpp"
#include "runtime/cuda/device_info.hpp"
#include "core/attn_impls.hpp"
#include "core/errors.hpp"
#include "core/phases.hpp"
#include "sim/config.hpp"
#include "sim/provenance.hpp"

namespace ulysses::calib::cuda {
namespace {

namespace rc = runtime::cuda;  // the backend (CudaBackend, device_info); the microbenchmarks are ours
using reports::Json;

using reports::utc_now;

struct Setup {
  std::vector<std::int64_t> S = {2048, 3072, 8192, 16384, 32768, 131072};
  std::vector<std::int64_t> h_local = {4, 16, 32, 64};  // flash (H_kv_local = H_l / 4)
  std::vector<std::int64_t> h_local_ref = {4, 16};      // reference (slow: fewer shapes)
  std::int64_t max_S_h32 = 32768;          // the largest S at 32 heads per rank (time)
  double max_point_s = 2.0;                // skip a point whose fwd+bwd would take longer (extrapolated)
  double max_point_ref_s = 0.5;            // same, reference kernel
  int warmup = 1, iters = 3;
  std::vector<std::int64_t> a2a_mib = {1, 4, 16, 64, 256, 1024};  // X = q bytes per rank
};

// One attention curve family: kernel x D x mask x heads per rank, over S.
// kernels: "flash" and "reference" (the whole calibration), or "flash" alone (--only attention).
// Each point's SM clock and board power (calib/point_clocks.hpp) go into its raw entry and the table; returns the
// section's clock summary for the provenance.
std::string calibrate_attention(const Setup& s, const HardwareProfile& hw, Calibration& c, Json& raw, std::string& out,
                                const std::vector<const char*>& kernels = {"flash", "reference"}) {
  PointClocks clocks(rc::pci_bus_id(0));
  struct Point {
    std::string key, name;  // name: the point's, attention_time's windows are named after it
    std::int64_t S;
    AttnTime a;
    std::size_t raw_index;
  };
  std::vector<Point> points;
  for (const char* kernel : kernels)
    for (std::int64_t D : {128, 64})
      for (bool causal : {true, false})
        for (std::int64_t h : std::string(kernel) == "flash" ? s.h_local : s.h_local_ref) {
          const double max_point_s = std::string(kernel) == "flash" ? s.max_point_s : s.max_point_ref_s;
          const std::int64_t kv = std::max<std::int64_t>(1, h / 4);
          const std::string key = fmt::format("ulysses_{}@d{}.{}.h{}", kernel, D, causal ? "causal" : "full", h);
          // the flash backward's grid runs over kv heads (kernels/attention_flash_bwd.cu): its
          // efficiency follows the kv heads per rank, the forward's the query heads per rank
          const std::string bwd_key = std::string(kernel) == "flash"
                                          ? fmt::format("ulysses_{}@d{}.{}.kv{}", kernel, D, causal ? "causal" : "full", kv)
                                          : key;
          Curve fwd, bwd;
          double last_s = 0, last_S = 0;
          for (std::int64_t S : s.S) {
            if (h >= 32 && S > s.max_S_h32) continue;  // (time; the curve is flat there)
            // attention time grows as S^2: skip points that would take too long
            if (last_s > 0 && last_s * (double(S) / last_S) * (double(S) / last_S) > max_point_s) continue;
            const std::string name = fmt::format("{} S={}", key, S);
            const AttnTime a = attention_time(kernel, S, h, kv, D, causal, s.warmup, s.iters, 0, 0, &clocks, name);
            last_s = a.fwd_s + a.bwd_s, last_S = double(S);
            const double ef = a.fwd_flops / a.fwd_s / hw.bf16_dense_flops, eb = a.bwd_flops / a.bwd_s / hw.bf16_dense_flops;
            fwd.points.emplace_back(double(S), std::min(ef, 1.0));
            bwd.points.emplace_back(double(S), std::min(eb, 1.0));
            raw["attention"].push_back({{"key", key}, {"kernel", kernel}, {"S", S}, {"H_local", h}, {"H_kv_local", kv},
                                        {"D", D}, {"causal", causal}, {"fwd_s", a.fwd_s}, {"bwd_s", a.bwd_s},
                                        {"fwd_flops", a.fwd_flops}, {"bwd_flops", a.bwd_flops}});
            points.push_back({key, name, S, a, raw["attention"].size() - 1});
            std::cerr << fmt::format("  attention {} S={}: fwd {:.1f} bwd {:.1f} TFLOP/s\n", key, S, a.fwd_flops / a.fwd_s / 1e12,
                                     a.bwd_flops / a.bwd_s / 1e12);
          }
          if (fwd.empty()) continue;
          c.attn_fwd_eff.emplace_back(key, fwd);
          c.attn_bwd_eff.emplace_back(bwd_key, bwd);
        }
  clocks.stop();
  const std::string clock_summary = clocks.summary();
  reports::Table t({{"key", "", reports::Align::left}, {"S", ""}, {"fwd", "us"}, {"bwd", "us"}, {"fwd", "TFLOP/s"},
                    {"bwd", "TFLOP/s"}, {"fwd eff", ""}, {"bwd eff", ""}, {"fwd clock", "MHz"}, {"bwd clock", "MHz"}});
  for (const Point& p : points) {
    std::string mhz[2];
    for (int i = 0; i < 2; ++i) {  // per pass: <pass>_sm_mhz, <pass>_watts, <pass>_clock_samples where sampled
      const std::string pass = i == 0 ? "fwd" : "bwd";
      const auto* ck = clocks.of(attention_pass_point(p.name, pass.c_str()));
      mhz[i] = ck ? fmt::format("{:.0f}", ck->sm_mhz_median) : "-";
      if (ck)
        raw["attention"][p.raw_index].update({{pass + "_sm_mhz", ck->sm_mhz_median}, {pass + "_watts", ck->watts_mean},
                                              {pass + "_clock_samples", ck->samples}});
    }
    t.add_row({p.key, fmt::format("{}", p.S), fmt::format("{:.0f}", p.a.fwd_s * 1e6), fmt::format("{:.0f}", p.a.bwd_s * 1e6),
               fmt::format("{:.1f}", p.a.fwd_flops / p.a.fwd_s / 1e12), fmt::format("{:.1f}", p.a.bwd_flops / p.a.bwd_s / 1e12),
               fmt::format("{:.3f}", p.a.fwd_flops / p.a.fwd_s / hw.bf16_dense_flops),
               fmt::format("{:.3f}", p.a.bwd_flops / p.a.bwd_s / hw.bf16_dense_flops), mhz[0], mhz[1]});
  }
  out += fmt::format("attention (B=1, H_kv_local = H_local/4, median of {} after {} warm-up; eff = FLOPs/t / {:.1f} TFLOP/s; "
                     "SM clock: NVML every 10 ms over each pass's calls, warm-up included; '-': none fell inside)\n",
                     s.iters, s.warmup, hw.bf16_dense_flops / 1e12) +
         t.render() + "SM clock of the attention points: " + clock_summary + "\n";
  return clock_summary;
}

// Exchange at P from the block's own exchange phases (attention skipped, ranks aligned) with
// the attention shape of Llama-3.1-8B (H = 32, H_kv = 8, D = 128), at several sizes
// X = q bytes per rank (the q,k,v phases move 1.5 X):
//   alpha per tensor = a2a.out.bwd of a 64-token-per-rank exchange minus its pack copy;
//   per phase k (a2a.qkv.fwd, a2a.out.fwd, a2a.out.bwd, a2a.qkv.bwd; n_k tensors, b_k bytes):
//     GBps_k(b_k) = b_k / (t_k - launches_k * alpha)    -> calibrated.a2a_phase_GBps "<k>@p<P>";
//   busbw(X) = (P-1)/P * X / (t(a2a.out.bwd) - alpha - 2X/pack) for the generic exchange
//   formula (the step's exchanges, other sp sizes' fallbacks); derivation in calib/a2a_fit.cpp.
void calibrate_a2a(const Setup& s, int P, Calibration& c, Json& raw, std::string& out) {
  const std::int64_t H = 32, H_kv = 8, D = 128;
  auto phases = [&](std::int64_t S, std::string* transport) {
    runtime::BlockShape b;
    b.B = 1, b.S = S, b.H = H, b.H_kv = H_kv, b.D = D, b.P = P, b.causal = true, b.attn_implementation = "ulysses_reference";
    const auto per_rank = exchange_phase_times(b, 3, 10, 120, transport);
    std::array<double, 6> t{};  // max over ranks of the per-rank median (as Measurement)
    for (const auto& r : per_rank)
      for (int k = 0; k < 6; ++k) t[k] = std::max(t[k], r[k]);
    return t;
  };
  const double pack = c.pack_GBps * 1e9;
  const double q_per_row = double(H) * D * 2;  // q bytes per local row
  const std::int64_t S_tiny = 64 * P;
  const auto tiny = phases(S_tiny, nullptr);
  const double X_tiny = double(S_tiny) / P * q_per_row;
  c.a2a_alpha_per_tensor_s = std::max(0.0, tiny[3] - 2 * X_tiny / pack);
  c.a2a_alpha_s = c.a2a_alpha_per_tensor_s;
  std::vector<A2aSample> samples;
  std::string transport = "nccl";
  for (std::int64_t mib : s.a2a_mib) {
    const std::int64_t S = static_cast<std::int64_t>(mib * 1048576 / q_per_row) * P;  // X = mib MiB
    A2aSample smp;
    smp.t_s = phases(S, &transport);
    smp.q_bytes = double(S) / P * q_per_row, smp.qkv_bytes = 1.5 * smp.q_bytes;
    samples.push_back(smp);
  }
  raw["a2a_transport"] = transport;  // p2p (direct stores) or nccl: the calibration holds for this transport
  const A2aDerived got = derive_a2a_curves(P, samples, transport, c);  // calib/a2a_fit.hpp
  reports::Table t({{"X=q bytes/rank", "B"}, {"qkv.fwd", "us"}, {"out.fwd", "us"}, {"out.bwd", "us"}, {"qkv.bwd", "us"},
                    {"qkv.fwd", "GB/s"}, {"out.fwd", "GB/s"}, {"out.bwd", "GB/s"}, {"qkv.bwd", "GB/s"}, {"busbw", "GB/s"}});
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const A2aSample& smp = samples[i];
    std::vector<std::string> row{fmt::format("{:.0f}", smp.q_bytes)};
    for (int k : kExchangePhases) row.push_back(fmt::format("{:.1f}", smp.t_s[k] * 1e6));
    for (int k : kExchangePhases) row.push_back(fmt::format("{:.1f}", got.GBps[k][i]));
    row.push_back(fmt::format("{:.1f}", got.busbw_GBps[i]));
    Json j{{"P", P}, {"q_bytes_per_rank", smp.q_bytes}, {"qkv_bytes_per_rank", smp.qkv_bytes}, {"busbw_GBps", got.busbw_GBps[i]}};
    for (int k : kExchangePhases) j[std::string(core::kBlockPhaseNames[k]) + "_s"] = smp.t_s[k];
    raw["a2a"].push_back(j);
    t.add_row(row);
  }
  out += fmt::format("\nexchange P={} (the block's phases, attention skipped; H={} H_kv={} D={}; alpha = {:.1f} us per tensor; "
                     "GB/s = bytes / (t - launches * alpha), launches = 1 for the p2p transport, else tensors; transport {})\n",
                     P, H, H_kv, D, c.a2a_alpha_per_tensor_s * 1e6, transport) +
         t.render();
}

// Exchange after idle links: a2a.out.bwd of 64 MiB q per rank right after every SM spun T ms
// without NVLink traffic (calib/cuda/microbench.hpp exchange_after_idle); penalty(T) = max(0, t(T) - t(0)) ->
// calibrated.a2a_idle_penalty_us (x: T in ms, y: us), which the model adds to the exchanges that
// follow attention (sim/timing.cpp). Found by the validation set (docs/VALIDATION.md finding 3).
void calibrate_a2a_idle(int P, Calibration& c, Json& raw, std::string& out) {
  runtime::BlockShape b;
  b.B = 1, b.S = 8192 * P, b.H = 32, b.H_kv = 8, b.D = 128, b.P = P, b.causal = true, b.attn_implementation = "ulysses_reference";
  // dense around 40-50 ms, where the first H200 measurement and the validation set put the step
  const std::vector<double> idle_ms = {0, 1, 2, 5, 10, 20, 30, 35, 40, 42, 44, 46, 48, 50, 55, 60, 100, 200};
  const std::vector<double> t = exchange_after_idle(b, idle_ms, 1, 5, 120);
  derive_a2a_idle_curve(idle_ms, t, c);  // calib/a2a_fit.hpp
  reports::Table tab({{"idle", "ms"}, {"a2a.out.bwd", "us"}, {"penalty", "us"}});
  raw["a2a_idle"] = Json::array();
  for (std::size_t i = 0; i < idle_ms.size(); ++i) {
    const double p_us = std::max(0.0, t[i] - t[0]) * 1e6;
    tab.add_row({fmt::format("{:g}", idle_ms[i]), fmt::format("{:.1f}", t[i] * 1e6), fmt::format("{:.1f}", p_us)});
    raw["a2a_idle"].push_back({{"P", P}, {"idle_ms", idle_ms[i]}, {"a2a.out.bwd_s", t[i]}, {"penalty_us", p_us}});
  }
  out += fmt::format("\nexchange after idle links (P={}, a2a.out.bwd, 64 MiB q per rank, every SM spinning T ms first; "
                     "median of 5 after 1 warm-up, max over ranks)\n",
                     P) +
         tab.render();
}

// GPU-to-GPU spread: the block at S = 64K on P GPUs; per rank the median attention time.
void calibrate_skew(int P, Json& raw, std::string& out) {
  runtime::BlockShape b;
  b.B = 1, b.S = 65536, b.H = 32, b.H_kv = 8, b.D = 128, b.P = P, b.causal = true, b.attn_implementation = "ulysses_flash";
  runtime::RunOptions opt;
  opt.warmup = 1, opt.iters = 7;
  rc::CudaRunConfig cfg;
  std::vector<rc::RankReport> reps;
  const auto m = rc::CudaBackend().run_block_ex(b, opt, cfg, &reps);
  if (!m.correct) throw std::runtime_error("the skew calibration block failed its correctness checks");
  std::vector<double> attn;
  for (const auto& r : reps) {
    std::vector<double> v;
    for (const auto& t : r.phase_s) v.push_back(t[1] + t[4]);
    std::sort(v.begin(), v.end());
    attn.push_back(v[v.size() / 2]);
  }
  const double hi = *std::max_element(attn.begin(), attn.end()), lo = *std::min_element(attn.begin(), attn.end());
  const double skew = hi > 0 ? (hi - lo) / hi : 0;  // shown, not written (docs/VALIDATION.md)
  raw["skew"] = {{"S", b.S}, {"H", b.H}, {"H_kv", b.H_kv}, {"D", b.D}, {"P", P}, {"attn_fwd_bwd_s_per_rank", attn}};
  out += fmt::format("rank skew (shown only: it varies from block to block): attention fwd+bwd per rank at S=64K H=32 H_kv=8 D=128 causal: {} ms -> {:.3f}%\n",
                     [&] { std::string s; for (double a : attn) s += fmt::format("{}{:.3f}", s.empty() ? "" : ", ", a * 1e3); return s; }(),
                     skew * 100);
}

// NCCL all-gather and reduce-scatter over P GPUs (ZeRO-3's collectives), nccl-tests' table: 1 MiB to 1 GiB.
void calibrate_collectives(int P, Calibration& c, Json& raw, std::string& out) {
  std::vector<std::int64_t> sizes;
  for (std::int64_t b = std::int64_t{1} << 20; b <= std::int64_t{1} << 30; b *= 4) sizes.push_back(b);
  const std::vector<CollectiveRow> rows = collective_times(P, sizes, 3, 10, 120);
  Curve ag, rs;
  if (!raw.contains("collectives")) raw["collectives"] = Json::array();
  out += fmt::format("\nNCCL all-gather and reduce-scatter, bf16, {} GPUs (calibrated.allgather_busbw_GBps / "
                     "reduce_scatter_busbw_GBps; 10 calls back to back after 3, the slowest rank):\n"
                     "#        size    all-gather             reduce-scatter        #wrong\n"
                     "#         (B)     time (us)  busbw (GB/s)  time (us)  busbw (GB/s)\n",
                     P);
  for (const CollectiveRow& r : rows) {
    const double ag_bw = busbw_GBps(r.bytes, r.allgather_s, P), rs_bw = busbw_GBps(r.bytes, r.reduce_scatter_s, P);
    ag.points.push_back({double(r.bytes), ag_bw});
    rs.points.push_back({double(r.bytes), rs_bw});
    raw["collectives"].push_back({{"P", P}, {"bytes", r.bytes}, {"allgather_s", r.allgather_s},
                                  {"reduce_scatter_s", r.reduce_scatter_s}, {"wrong", r.wrong}});
    out += fmt::format("  {:>12} {:>13.1f} {:>13.1f} {:>10.1f} {:>13.1f} {:>9}\n", r.bytes, r.allgather_s * 1e6, ag_bw,
                       r.reduce_scatter_s * 1e6, rs_bw, r.wrong);
  }
  c.allgather_busbw_GBps.emplace_back(P, ag);
  c.reduce_scatter_busbw_GBps.emplace_back(P, rs);
}

// The models whose GEMM shapes `calibrate --backend cuda` measures (the validation sets' models).
constexpr std::array<const char*, 3> kGemmModels = {"llama-3.1-8b", "qwen3-4b", "qwen3-8b"};

// Our runtime's elementwise kernels, the host optimizer and the GEMMs: the step model's rates for plan.runtime ulysses.
// Returns the GEMM points' clock summary (calib/point_clocks.hpp) for the provenance.
std::string calibrate_kernels(const HardwareProfile& hw, Calibration& c, Json& raw, std::string& out) {
  std::string kr;
  c.ulysses_bytes_per_elem = ulysses_kernel_rates(hw.hbm_GBps, 3, 10, kr);
  out += "our runtime's elementwise kernels alone (calibrated.ulysses_bytes_per_elem; T=32768 h=4096 F=14336 H=32/8 D=128 "
         "V=128256, cross-entropy over 4096 rows):\n" + kr;
  raw["ulysses_bytes_per_elem"] = Json::object();
  for (int i = 0; i < kEagerRates; ++i)
    if (const double x = c.ulysses_bytes_per_elem[static_cast<std::size_t>(i)]; x > 0)
      raw["ulysses_bytes_per_elem"][std::string(kEagerRateKeys[static_cast<std::size_t>(i)])] = x;
  // the optimizer on the host (offload_optimizer): runtime/host_adam.cpp on every core
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const HostAdamRate h = host_adam_rate(threads, 3);
  c.ulysses_host_adam_s_per_param = h.s_per_param;
  raw["ulysses_host_adam_ns_per_param"] = h.s_per_param * 1e9;
  out += fmt::format("the optimizer on the host (calibrated.ulysses_host_adam_ns_per_param): {} parameters with bf16 gradients, "
                     "{} threads: {:.1f} ms per step (median of 3): {:.3f} ns per parameter\n",
                     h.params, threads, h.step_s * 1e3, h.s_per_param * 1e9);
  // the host link while our GEMMs run (our checkpoint copies overlap the layers: calib/cuda/host_link_busy.hpp)
  const HostLinkBusy busy = host_link_busy(256 << 20, 2, 5);
  if (busy.ok) c.host_link_h2d_busy_GBps = busy.h2d_GBps, c.host_link_d2h_busy_GBps = busy.d2h_GBps;
  raw["host_link_busy"] = {{"bytes", 256 << 20},          {"gemms", busy.gemms},
                           {"covered", busy.covered},     {"timed", busy.timed}, {"ok", busy.ok},
                           {"gemm_tflops", busy.gemm_tflops}, {"h2d_GBps", busy.h2d_GBps},
                           {"d2h_GBps", busy.d2h_GBps},       {"both_h2d_GBps", busy.both_h2d_GBps},
                           {"both_d2h_GBps", busy.both_d2h_GBps}, {"idle_h2d_GBps", busy.idle_h2d_GBps},
                           {"idle_d2h_GBps", busy.idle_d2h_GBps}};
  if (!busy.ok) {
    out += fmt::format("the host link while our GEMMs run: not measured ({} GEMMs did not cover the copies; keys not written)\n",
                       busy.gemms);
  } else {
    out += fmt::format("the host link while our GEMMs run (calibrated.host_link_*_busy_GBps; 256 MiB pinned, {} GEMMs of "
                       "16384x4096x4096 at {:.0f} TFLOP/s alone around each copy, {} of {} copies covered): h2d {:.1f} GB/s, "
                       "d2h {:.1f} GB/s; both at once {:.1f} / {:.1f}; idle in the same call {:.1f} / {:.1f}\n",
                       busy.gemms, busy.gemm_tflops, busy.covered, busy.timed, busy.h2d_GBps, busy.d2h_GBps, busy.both_h2d_GBps,
                       busy.both_d2h_GBps, busy.idle_h2d_GBps, busy.idle_d2h_GBps);
  }
  // our cuBLASLt GEMMs at the presets' layer and loss-head shapes (calib/cuda/gemm_rates.hpp)
  GemmCalibration g;
  std::vector<ModelSpec> models;
  for (const char* m : kGemmModels) models.push_back(load_model(m));
  g.NK = gemm_shapes_of(models);
  std::string gr;
  PointClocks clocks(rc::pci_bus_id(0));
  c.ulysses_gemm_eff = ulysses_gemm_curves(hw.bf16_dense_flops, g, gr, 0, &clocks);
  clocks.stop();
  const std::string clock_summary = clocks.summary();
  out += fmt::format("our runtime's GEMMs alone (calibrated.ulysses_gemm_eff; cuBLASLt bf16, fp32 accumulate; the layers and "
                     "loss heads of {}; eff = 2 M N K / t / {:.1f} TFLOP/s, median of {}):\n",
                     fmt::join(kGemmModels, ", "), hw.bf16_dense_flops / 1e12, g.iters) + gr;
  out += "SM clock of the GEMM points (NVML every 10 ms over each point's warm-up and timed calls, after the call that "
         "chooses its algorithm): " + clock_summary + "\n";
  // per point [M, eff] and, where sampled, its clock and power: [M, eff, sm_mhz, watts, samples]
  raw["ulysses_gemm_eff"] = Json::object();
  for (const auto& [key, curve] : c.ulysses_gemm_eff) {
    Json pts = Json::array();
    for (const auto& [x, y] : curve.points) {
      const auto* ck = clocks.of(gemm_point_name(key, static_cast<std::int64_t>(x)));
      pts.push_back(ck ? Json{x, y, ck->sm_mhz_median, ck->watts_mean, ck->samples} : Json{x, y});
    }
    raw["ulysses_gemm_eff"][key] = pts;
  }
  return clock_summary;
}

// Bare implementation keys: the D=128 causal curve at 16 heads per rank (fwd) / 4 kv heads (bwd) under the
// implementation's name alone (any other shape), for the curves of `impl` (empty: every implementation) that have none yet.
void add_bare_attention_keys(Calibration& c, std::string_view impl = {}) {
  for (auto* curves : {&c.attn_fwd_eff, &c.attn_bwd_eff}) {
    std::vector<std::pair<std::string, Curve>> bare;
    for (const auto& [k, cv] : *curves)
      if ((k.find("@d128.causal.h16") != std::string::npos || k.find("@d128.causal.kv4") != std::string::npos) &&
          (impl.empty() || k.substr(0, k.find('@')) == impl))
        bare.emplace_back(k.substr(0, k.find('@')), cv);
    for (auto& b : bare) {
      const bool have = std::any_of(curves->begin(), curves->end(), [&](const auto& x) { return x.first == b.first; });
      if (!have) curves->push_back(std::move(b));
    }
  }
}

}  // namespace

Result calibrate(const HardwareProfile& hw, bool quick, const std::string& cmd) {
  Setup s;
  if (quick) s.S = {2048, 8192}, s.h_local = {4, 16}, s.h_local_ref = {4}, s.a2a_mib = {1, 16, 64};
  const rc::DeviceInfo info = rc::device_info();
  Result r;
  r.raw = Json{{"measured_at", utc_now()}, {"command", cmd}, {"gpu", info.name}, {"gpus", info.count}, {"driver", info.driver},
               {"cuda_runtime", info.runtime}, {"nccl", info.nccl}, {"device_total_bytes", info.total_bytes},
               {"attention", Json::array()}, {"a2a", Json::array()}};
  Json& raw = r.raw;
  Calibration& c = r.c;
  std::string& out = r.report;
  // fixed memory: the context with every block kernel loaded (lazy module loading), device 0
  load_block_kernels(0);
  const std::int64_t free_ctx = rc::device_free_bytes(0);
  c.cuda_context_bytes = std::max<std::int64_t>(0, hw.hbm_bytes - free_ctx);
  raw["free_after_context_bytes"] = free_ctx;
  c.pack_GBps = pack_GBps(256 << 20, 3, 10);
  const auto link = host_link(256 << 20, 2, 7);
  c.host_link_h2d_GBps = link.h2d_GBps, c.host_link_d2h_GBps = link.d2h_GBps;
  out += fmt::format("device 0: {}; {} GPU(s); driver {}, CUDA runtime {}, NCCL {}\n", info.name, info.count, info.driver,
                     info.runtime, info.nccl);
  out += fmt::format("pack (seq->head, 256 MiB): {:.0f} GB/s (read + write); host link pinned 256 MiB: h2d {:.1f}, d2h {:.1f} GB/s\n",
                     c.pack_GBps, link.h2d_GBps, link.d2h_GBps);
  const std::string gemm_clock = calibrate_kernels(hw, c, raw, out);
  const std::string attn_clock = calibrate_attention(s, hw, c, raw, out);
  add_bare_attention_keys(c);
  if (info.count >= 2) {
    calibrate_a2a(s, 2, c, raw, out);
    calibrate_a2a_idle(2, c, raw, out);
    calibrate_skew(2, raw, out);
    const std::int64_t free_nccl = rc::device_free_bytes(0);
    c.nccl_buffer_bytes = std::max<std::int64_t>(0, free_ctx - free_nccl);
    raw["free_after_nccl_bytes"] = free_nccl;
    // after that reading: the communicators of 4 and 8 ranks are not the P = 2 run's
    c.allgather_busbw_GBps.clear(), c.reduce_scatter_busbw_GBps.clear();
    for (int P : {2, 4, 8})
      if (P <= info.count) calibrate_collectives(P, c, raw, out);
  } else {
    out += "\nexchange: one GPU visible, no sp size >= 2 to measure; no all-gather / reduce-scatter either\n";
  }
  out += fmt::format("\nfixed device memory: context + kernels {:.3f} GiB (profile HBM {:.2f} GiB - free {:.3f} GiB; "
                     "cudaMemGetInfo total {:.3f} GiB), NCCL {:.3f} GiB\n",
                     c.cuda_context_bytes / 1073741824.0, hw.hbm_bytes / 1073741824.0, free_ctx / 1073741824.0,
                     info.total_bytes / 1073741824.0, std::max<std::int64_t>(c.nccl_buffer_bytes, 0) / 1073741824.0);
  set_provenance(c.provenance, "cuda", fmt::format(
      "measured {} by `{}` on {} ({} GPU(s), {}, CUDA runtime {}, NCCL {}); attention: our kernels, B=1, H_kv_local = "
      "H_local/4, median of {} after {} warm-up, eff = FLOPs / t / {:.1f} TFLOP/s, keys impl@d<D>.<mask>.h<H_local>, bare "
      "impl = d128 causal h16 (fwd) / kv4 (bwd), flash bwd keyed by kv heads per rank; a2a: the block's exchange phases "
      "(attention skipped, H=32 H_kv=8 D=128) median of 10, alpha per tensor from a 64-row a2a.out.bwd, a2a_phase_GBps = bytes / "
      "(t - tensors * alpha) per phase, busbw(X) = (P-1)/P * X / (t(a2a.out.bwd) - alpha - pack copy); pack: 256 MiB seq->head; host link: 256 MiB pinned cudaMemcpyAsync; cuda_context = profile HBM "
      "- cudaMemGetInfo free with the block kernels loaded; nccl_buffer = free before - after the P=2 communicators; "
      "ulysses_bytes_per_elem: our layer kernels alone at T=32768 h=4096 F=14336, median of 10, t * hbm_GBps / elements; "
      "host_link_*_busy_GBps: 256 MiB pinned copies while our GEMMs run on another stream; "
      "ulysses_gemm_eff: our cuBLASLt GEMMs alone per pass and weight shape over M, median of 5; gemm_eff (PyTorch's) not "
      "calibrated; a2a transport {} (p2p: one fixed cost per exchange phase, nccl: one per tensor); allgather / "
      "reduce_scatter_busbw_GBps: NCCL bf16 over 2, 4 and 8 GPUs as visible, 1 MiB to 1 GiB, 10 calls back to back on the "
      "slowest rank, nccl-tests' busbw; SM clock while timed (NVML, per point in the raw file): attention {}, GEMMs {}",
      utc_now(), cmd, info.name, info.count, info.driver, info.runtime, info.nccl, s.iters, s.warmup, hw.bf16_dense_flops / 1e12,
      raw.contains("a2a_transport") ? raw["a2a_transport"].get<std::string>() : std::string("not measured"), attn_clock,
      gemm_clock));
  raw["provenance"] = c.provenance;
  return r;
}

Result calibrate_idle_only(const HardwareProfile& hw, const std::string& cmd) {
  const rc::DeviceInfo dev = rc::device_info();
  if (dev.count < 2) throw core::InputError("", "--only", "a2a-idle needs 2 GPUs");
  Result r;
  r.c = hw.calibrated;
  r.raw = Json{{"measured_at", utc_now()}, {"command", cmd}, {"gpu", dev.name}, {"gpus", dev.count}};
  calibrate_a2a_idle(2, r.c, r.raw, r.report);
  set_provenance(r.c.provenance, "a2a_idle", fmt::format("a2a_idle_penalty_us measured {} by `{}` on {}", utc_now(), cmd, dev.name));
  return r;
}

Result calibrate_attention_only(const HardwareProfile& hw, const std::string& cmd) {
  const rc::DeviceInfo dev = rc::device_info();
  Result r;
  r.c = hw.calibrated;
  r.raw = Json{{"measured_at", utc_now()}, {"command", cmd}, {"gpu", dev.name}, {"gpus", dev.count}, {"attention", Json::array()}};
  // our flash kernels' curves are measured again (the kernels changed); every other implementation's stay
  const std::string_view flash = core::calibrated_key(core::AttnKernel::flash);
  auto ours = [&](const std::pair<std::string, Curve>& x) { return x.first.substr(0, x.first.find('@')) == flash; };
  for (auto* curves : {&r.c.attn_fwd_eff, &r.c.attn_bwd_eff})
    curves->erase(std::remove_if(curves->begin(), curves->end(), ours), curves->end());
  const Setup s;
  const std::string clock = calibrate_attention(s, hw, r.c, r.raw, r.report, {"flash"});
  add_bare_attention_keys(r.c, flash);  // only ours: another implementation's predictions stay as they were
  set_provenance(r.c.provenance, "attention",
                 fmt::format("{} attention curves measured {} by `{}` on {} (our kernels as built: D=64 {}, D=128 {}; "
                             "B=1, H_kv_local = H_local/4, median of {} after {} warm-up; SM clock while timed: {})",
                             flash, utc_now(), cmd, dev.name, kernels::attn_flash_kernels_in_use(64),
                             kernels::attn_flash_kernels_in_use(128), s.iters, s.warmup, clock));
  return r;
}

Result calibrate_kernels_only(const HardwareProfile& hw, const std::string& cmd) {
  const rc::DeviceInfo dev = rc::device_info();
  Result r;
  r.c = hw.calibrated;
  r.raw = Json{{"measured_at", utc_now()}, {"command", cmd}, {"gpu", dev.name}, {"gpus", dev.count}};
  const std::string clock = calibrate_kernels(hw, r.c, r.raw, r.report);
  set_provenance(r.c.provenance, "ulysses_kernels",
                 fmt::format("ulysses_bytes_per_elem measured {} by `{}` on {} (our layer kernels alone at T=32768 "
                             "h=4096 F=14336 H=32/8 D=128 V=128256, median of 10, t * hbm_GBps / elements; "
                             "ulysses_host_adam_ns_per_param: runtime/host_adam.cpp on one [F, h] tensor, every core; "
                             "host_link_*_busy_GBps: 256 MiB pinned copies while our GEMMs run on another stream; "
                             "ulysses_gemm_eff: our cuBLASLt GEMMs alone per pass and weight shape over M, median of 5; "
                             "their SM clock while timed: {})",
                             utc_now(), cmd, dev.name, clock));
  return r;
}

}  // namespace ulysses::calib::cuda
