// ulysses calibrate --backend cuda (dispatched from cli/cmd_calibrate.cpp): microbenchmarks on the
// GPU host written as the `calibrated:` section of a hardware profile (sim/profile_io.hpp):
//   - attention efficiency vs S for each CUDA kernel (ulysses_flash, ulysses_reference), filed per
//     head dim, mask and heads per rank (sim/attn_key.hpp keys, e.g. ulysses_flash@d128.causal.h16),
//     forward and backward: eff = FLOPs / time / bf16_dense_flops;
//   - the Ulysses exchange for each sp size the host has (2 GPUs: P = 2): alpha = the time of a
//     tiny exchange, busbw(bytes) = (P-1)/P * bytes / (t - alpha - copies) with copies the pack /
//     unpack time the model charges (sim/timing.cpp a2a_time_s), so the model reproduces the
//     measured exchange at every calibration point; bare ncclAlltoAll busbw shown next to it;
//   - pack bandwidth, pinned host<->device copies, fixed device memory (context with the block's
//     kernels loaded: profile HBM - free; NCCL: free before - free after the communicators).
// GEMMs are not calibrated (no cuBLAS in this build): gemm_eff stays the profile's datasheet value.
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <unistd.h>

#include <fmt/format.h>

#include "cli/options.hpp"
#include "reports/json_out.hpp"
#include "reports/table.hpp"
#include "sim/config.hpp"
#include "sim/config_internal.hpp"
#include "sim/errors.hpp"
#include "sim/profile_io.hpp"

#ifdef ULYSSES_WITH_CUDA
#include "runtime/cuda/bench.hpp"
#include "runtime/cuda/calibrate.hpp"
#include "runtime/cuda/cuda_backend.hpp"
#endif

namespace ulysses::cli {

#ifndef ULYSSES_WITH_CUDA
int run_calibrate_cuda(int, char**) {
  throw InputError("", "--backend", "'cuda': this ulysses was built without the CUDA backend (CUDA, NCCL, CUPTI, NVTX)");
}
#else
namespace {

namespace rc = runtime::cuda;
using reports::Json;

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

struct Setup {
  std::vector<std::int64_t> S = {2048, 8192, 32768, 131072};
  std::vector<std::int64_t> h_local = {4, 16, 32};
  std::int64_t max_S_h32 = 32768;          // the largest S at 32 heads per rank (time)
  double max_point_s = 2.0;                // skip a point whose fwd+bwd would take longer (extrapolated)
  int warmup = 1, iters = 3;
  std::vector<std::int64_t> a2a_mib = {1, 4, 16, 64, 256, 1024};
};

// One attention curve family: kernel x D x mask x heads per rank, over S.
void calibrate_attention(const Setup& s, const HardwareProfile& hw, Calibration& c, Json& raw, std::string& out) {
  reports::Table t({{"key", "", reports::Align::left}, {"S", ""}, {"fwd", "us"}, {"bwd", "us"}, {"fwd", "TFLOP/s"},
                    {"bwd", "TFLOP/s"}, {"fwd eff", ""}, {"bwd eff", ""}});
  for (const char* kernel : {"flash", "reference"})
    for (std::int64_t D : {128, 64})
      for (bool causal : {true, false})
        for (std::int64_t h : s.h_local) {
          const std::string key = fmt::format("ulysses_{}@d{}.{}.h{}", kernel, D, causal ? "causal" : "full", h);
          Curve fwd, bwd;
          double last_s = 0, last_S = 0;
          for (std::int64_t S : s.S) {
            if (h >= 32 && S > s.max_S_h32) continue;
            // attention time grows as S^2: skip points that would take too long
            if (last_s > 0 && last_s * (double(S) / last_S) * (double(S) / last_S) > s.max_point_s) continue;
            const auto a = rc::attention_time(kernel, S, h, std::max<std::int64_t>(1, h / 4), D, causal, s.warmup, s.iters);
            last_s = a.fwd_s + a.bwd_s, last_S = double(S);
            const double ef = a.fwd_flops / a.fwd_s / hw.bf16_dense_flops, eb = a.bwd_flops / a.bwd_s / hw.bf16_dense_flops;
            fwd.points.emplace_back(double(S), std::min(ef, 1.0));
            bwd.points.emplace_back(double(S), std::min(eb, 1.0));
            raw["attention"].push_back({{"key", key}, {"kernel", kernel}, {"S", S}, {"H_local", h}, {"H_kv_local", std::max<std::int64_t>(1, h / 4)},
                                        {"D", D}, {"causal", causal}, {"fwd_s", a.fwd_s}, {"bwd_s", a.bwd_s},
                                        {"fwd_flops", a.fwd_flops}, {"bwd_flops", a.bwd_flops}});
            t.add_row({key, fmt::format("{}", S), fmt::format("{:.0f}", a.fwd_s * 1e6), fmt::format("{:.0f}", a.bwd_s * 1e6),
                       fmt::format("{:.1f}", a.fwd_flops / a.fwd_s / 1e12), fmt::format("{:.1f}", a.bwd_flops / a.bwd_s / 1e12),
                       fmt::format("{:.3f}", ef), fmt::format("{:.3f}", eb)});
            std::cerr << fmt::format("  attention {} S={}: fwd {:.1f} bwd {:.1f} TFLOP/s\n", key, S, a.fwd_flops / a.fwd_s / 1e12,
                                     a.bwd_flops / a.bwd_s / 1e12);
          }
          if (fwd.empty()) continue;
          c.attn_fwd_eff.emplace_back(key, fwd);
          c.attn_bwd_eff.emplace_back(key, bwd);
        }
  out += fmt::format("attention (B=1, H_kv_local = H_local/4, median of {} after {} warm-up; eff = FLOPs/t / {:.1f} TFLOP/s)\n",
                     s.iters, s.warmup, hw.bf16_dense_flops / 1e12) +
         t.render();
}

// Exchange at P: the block's q,k,v exchange (pack + one NCCL group + unpack) at several sizes.
void calibrate_a2a(const Setup& s, int P, Calibration& c, Json& raw, std::string& out) {
  const std::int64_t H = 8, D = 128;  // bytes per rank (q + k + v) = S/P * 3*H*D*2
  const double per_token = 3.0 * H * D * 2 / P;
  runtime::RunOptions opt;
  opt.warmup = 3, opt.iters = 10;
  const int slices = rc::default_slices();
  auto bench = [&](std::int64_t S) {
    runtime::BlockShape b;
    b.B = 1, b.S = S, b.H = H, b.H_kv = H, b.D = D, b.P = P, b.causal = true, b.attn_implementation = "ulysses_reference";
    const auto r = rc::bench_exchange(b, opt, {slices});
    for (const auto& row : r.rows)
      if (row.wrong > 0) throw std::runtime_error(fmt::format("exchange validation failed: {} wrong ({})", row.wrong, row.name));
    return r;
  };
  const double copy_Bps = c.pack_GBps * 1e9;
  const auto tiny = bench(32 * P);
  const double tiny_bytes = double(tiny.rows[0].bytes_per_rank);
  c.a2a_alpha_s = std::max(0.0, tiny.rows[0].median_s - 2 * tiny_bytes / copy_Bps);
  reports::Table t({{"bytes/rank", "B"}, {"ulysses", "us"}, {"bare a2a", "us"}, {"bare busbw", "GB/s"}, {"model busbw", "GB/s"}});
  Curve curve;
  for (std::int64_t mib : s.a2a_mib) {
    const std::int64_t S = std::max<std::int64_t>(P, static_cast<std::int64_t>(double(mib) * 1048576 / per_token) / P * P);
    const auto r = bench(S);
    const double bytes = double(r.rows[0].bytes_per_rank), t_u = r.rows[0].median_s;
    const double t_bare = r.rows.size() > 1 ? r.rows[1].median_s : 0;
    const double copies = 2 * bytes / copy_Bps;  // B = 1: one copy side (sim/timing.cpp)
    const double wire = std::max(t_u - c.a2a_alpha_s - copies, 0.1 * t_u);
    const double busbw = double(P - 1) / P * bytes / wire / 1e9;
    curve.points.emplace_back(bytes, busbw);
    const double bare_busbw = t_bare > 0 ? double(P - 1) / P * bytes / t_bare / 1e9 : 0;
    raw["a2a"].push_back({{"P", P}, {"bytes_per_rank", bytes}, {"ulysses_s", t_u}, {"bare_alltoall_s", t_bare},
                          {"bare_busbw_GBps", bare_busbw}, {"model_busbw_GBps", busbw}, {"slices", slices}});
    t.add_row({fmt::format("{:.0f}", bytes), fmt::format("{:.1f}", t_u * 1e6), fmt::format("{:.1f}", t_bare * 1e6),
               fmt::format("{:.1f}", bare_busbw), fmt::format("{:.1f}", busbw)});
  }
  c.a2a_busbw_GBps.emplace_back(P, curve);
  out += fmt::format("\nexchange P={} (q,k,v grouped, slices={}; alpha = {:.1f} us from a {:.0f}-byte exchange)\n", P, slices,
                     c.a2a_alpha_s * 1e6, tiny_bytes) +
         t.render();
}

}  // namespace

int run_calibrate_cuda(int argc, char** argv) {
  po::options_description d("calibrate --backend cuda options");
  d.add_options()("help,h", "this help")("backend", po::value<std::string>()->default_value("cuda"), "cuda")
      ("profile", po::value<std::string>()->default_value("h200-sxm-141gb"), "base profile (name or path)")
      ("profile-out", po::value<std::string>(), "write the base profile with the `calibrated:` section here (else print it)")
      ("json", po::value<std::string>(), "also write every raw measurement as JSON here")
      ("quick", po::bool_switch(), "two S points, h 4 and 16, three exchange sizes (a smoke test)");
  const auto vm = parse_args(argc, argv, d);
  if (vm.count("help")) {
    print_help(argv[0], "--backend cuda [--profile h200-sxm-141gb] [--profile-out FILE] [--json FILE]",
               "Measures the CUDA backend's building blocks and writes the `calibrated:` section of a profile.", d);
    return kExitOk;
  }
  const HardwareProfile hw = load_profile(vm["profile"].as<std::string>());
  Setup s;
  if (vm["quick"].as<bool>()) s.S = {2048, 8192}, s.h_local = {4, 16}, s.a2a_mib = {1, 16, 64};
  std::string cmd = "ulysses";
  for (int i = 1; i < argc; ++i) cmd += std::string(" ") + argv[i];

  const rc::DeviceInfo info = rc::device_info();
  Json raw{{"measured_at", utc_now()}, {"command", cmd}, {"gpu", info.name}, {"gpus", info.count}, {"driver", info.driver},
           {"cuda_runtime", info.runtime}, {"nccl", info.nccl}, {"device_total_bytes", info.total_bytes},
           {"attention", Json::array()}, {"a2a", Json::array()}};
  Calibration c;
  std::string out;
  // fixed memory: the context with every block kernel loaded (lazy module loading), device 0
  rc::load_block_kernels(0);
  const std::int64_t free_ctx = rc::device_free_bytes(0);
  c.cuda_context_bytes = std::max<std::int64_t>(0, hw.hbm_bytes - free_ctx);
  raw["free_after_context_bytes"] = free_ctx;
  c.pack_GBps = rc::pack_GBps(256 << 20, 3, 10);
  const auto link = rc::host_link(256 << 20, 2, 7);
  c.host_link_h2d_GBps = link.h2d_GBps, c.host_link_d2h_GBps = link.d2h_GBps;
  out += fmt::format("device 0: {}; {} GPU(s); driver {}, CUDA runtime {}, NCCL {}\n", info.name, info.count, info.driver,
                     info.runtime, info.nccl);
  out += fmt::format("pack (seq->head, 256 MiB): {:.0f} GB/s (read + write); host link pinned 256 MiB: h2d {:.1f}, d2h {:.1f} GB/s\n",
                     c.pack_GBps, link.h2d_GBps, link.d2h_GBps);
  calibrate_attention(s, hw, c, raw, out);
  // bare implementation keys: the D=128 causal curve at 16 heads per rank (any other shape)
  for (auto* curves : {&c.attn_fwd_eff, &c.attn_bwd_eff}) {
    std::vector<std::pair<std::string, Curve>> bare;
    for (const auto& [k, cv] : *curves)
      if (k.find("@d128.causal.h16") != std::string::npos) bare.emplace_back(k.substr(0, k.find('@')), cv);
    curves->insert(curves->end(), bare.begin(), bare.end());
  }
  if (info.count >= 2) {
    calibrate_a2a(s, 2, c, raw, out);
    const std::int64_t free_nccl = rc::device_free_bytes(0);
    c.nccl_buffer_bytes = std::max<std::int64_t>(0, free_ctx - free_nccl);
    raw["free_after_nccl_bytes"] = free_nccl;
  } else {
    out += "\nexchange: one GPU visible, no sp size >= 2 to measure\n";
  }
  out += fmt::format("\nfixed device memory: context + kernels {:.3f} GiB (profile HBM {:.2f} GiB - free {:.3f} GiB; "
                     "cudaMemGetInfo total {:.3f} GiB), NCCL {:.3f} GiB\n",
                     c.cuda_context_bytes / 1073741824.0, hw.hbm_bytes / 1073741824.0, free_ctx / 1073741824.0,
                     info.total_bytes / 1073741824.0, std::max<std::int64_t>(c.nccl_buffer_bytes, 0) / 1073741824.0);
  out += "GEMM: not calibrated (no cuBLAS in this build); gemm_eff stays the profile's value\n";
  c.provenance = fmt::format(
      "measured {} by `{}` on {} ({} GPU(s), {}, CUDA runtime {}, NCCL {}); attention: our kernels, B=1, H_kv_local = "
      "H_local/4, median of {} after {} warm-up, eff = FLOPs / t / {:.1f} TFLOP/s, keys impl@d<D>.<mask>.h<H_local>, bare "
      "impl = d128 causal h16; a2a: q,k,v exchange (pack + NCCL group + unpack) median of 10, busbw = (P-1)/P * bytes / (t - "
      "alpha - pack copies); pack: 256 MiB seq->head; host link: 256 MiB pinned cudaMemcpyAsync; cuda_context = profile HBM "
      "- cudaMemGetInfo free with the block kernels loaded; nccl_buffer = free before - after the P=2 communicators; GEMM not "
      "calibrated",
      utc_now(), cmd, info.name, info.count, info.driver, info.runtime, info.nccl, s.iters, s.warmup, hw.bf16_dense_flops / 1e12);
  raw["provenance"] = c.provenance;
  std::cout << out << "\n";
  if (vm.count("json")) {
    std::ofstream j(vm["json"].as<std::string>());
    if (!j) throw InputError("", "--json", "cannot write '" + vm["json"].as<std::string>() + "'");
    j << raw.dump(1) << "\n";
  }
  if (vm.count("profile-out")) {
    const std::string src = cfg::resolve(vm["profile"].as<std::string>(), "profiles", "profile", cfg::Where{"", "--profile", ""});
    const std::string dst = vm["profile-out"].as<std::string>();
    std::error_code ec;
    if (std::filesystem::absolute(src, ec) != std::filesystem::absolute(dst, ec))
      std::filesystem::copy_file(src, dst, std::filesystem::copy_options::overwrite_existing, ec);
    if (ec) throw InputError("", "--profile-out", fmt::format("cannot write '{}' ({})", dst, ec.message()));
    write_calibration(dst, c);
    std::cout << fmt::format("wrote {} (profile {} with a calibrated: section)\n", dst, hw.name);
  } else {
    std::cout << calibration_to_yaml(c);
  }
  return kExitOk;
}
#endif

}  // namespace ulysses::cli
