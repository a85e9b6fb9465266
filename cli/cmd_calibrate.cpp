// ulysses calibrate --backend cpu: microbenchmarks of the CPU backend (exchange bus bandwidth vs
// bytes per rank for each sp size, attention efficiency vs S, pack bandwidth), written as the
// `calibrated:` section of a hardware profile that predict() reads, with its provenance.
#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "reports/format.hpp"

#include "cli/calibrate_a2a.hpp"
#include "cli/calibration_out.hpp"
#include "cli/options.hpp"
#include "reports/table.hpp"
#include "runtime/cpu/cpu_backend.hpp"
#include "runtime/cpu/microbench.hpp"
#include "sim/config.hpp"
#include "sim/config_internal.hpp"
#include "sim/errors.hpp"
#include "sim/profile_io.hpp"

namespace ulysses::cli {

int run_calibrate_cuda(int argc, char** argv);  // cli/calibrate_cuda.cpp
int run_calibrate_deepspeed(int argc, char** argv);  // cli/calibrate_deepspeed.cpp

namespace {

using runtime::AttnDims;

std::vector<std::int64_t> parse_int_list(const std::string& text, const char* flag, std::int64_t lo) {
  std::vector<std::int64_t> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    try {
      std::size_t used = 0;
      const long long v = std::stoll(item, &used);
      if (used != item.size() || v < lo) throw std::invalid_argument("range");
      out.push_back(v);
    } catch (const std::exception&) {
      throw InputError("", flag, fmt::format("'{}' is not a comma-separated list of integers >= {}", text, lo));
    }
  }
  if (out.empty()) throw InputError("", flag, "must list at least one value");
  return out;
}

using reports::utc_now;

std::string host_name() {
  char buf[256] = {};
  return gethostname(buf, sizeof buf - 1) == 0 ? buf : "unknown host";
}

std::string command_line(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) {
    if (i) s += ' ';
    s += argv[i];
  }
  return s;
}

struct Setup {
  std::vector<std::int64_t> sp_sizes, a2a_bytes, attn_S;
  int threads = 2, iters = 5, attn_iters = 5;  // attention: median of 5 (a load blip on a shared host skews fewer)
  std::int64_t heads = 4, kv_heads = 1, head_dim = 64, pack_bytes = 1 << 20;
  bool causal = true;
  std::string impl = "ulysses_reference";
};

// a2a, as the time model charges it (sim/timing.cpp a2a_time_s, B = 1):
//   t = alpha + (P-1)/P * bytes / busbw(bytes) + 2 * bytes / pack_GBps   (one pack copy)
// alpha: a 4-byte all-to-all at P = 2; t: one seq->head exchange as the block runs it (fresh
// buffers, just-written source, pack + all-to-all); busbw solved from t so the model reproduces
// the measured exchange at every calibration point. The bare all-to-all's busbw is shown beside.
void calibrate_a2a(const Setup& s, Calibration& c, std::string& out) {
  c.a2a_alpha_s = runtime::cpu::alltoall_time_s(2, 2 * 2, 5 * s.iters);
  reports::Table t({{"P", ""}, {"bytes/rank", "B"}, {"a2a alone", "us"}, {"busbw", "GB/s"}, {"exchange", "us"},
                    {"copies", "us"}, {"model busbw", "GB/s"}});
  for (std::int64_t P : s.sp_sizes) {
    Curve curve;
    for (std::int64_t bytes : s.a2a_bytes) {
      const double frac = double(P - 1) / double(P);
      const double bare_s = runtime::cpu::alltoall_time_s(int(P), bytes, s.iters);
      const double t_s = runtime::cpu::exchange_time_s(int(P), bytes, s.iters);
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
void calibrate_attention(const Setup& s, const HardwareProfile& hw, Calibration& c, bool quick, std::string& out) {
  reports::Table t({{"curve", "", reports::Align::left}, {"S", ""}, {"fwd", "us"}, {"bwd", "us"}, {"fwd", "GFLOP/s"},
                    {"bwd", "GFLOP/s"}, {"fwd eff", ""}, {"bwd eff", ""}});
  auto measure = [&](const AttnDims& shape, const std::vector<std::int64_t>& S_list, int iters, bool also_bare) {
    Curve fwd, bwd;
    for (std::int64_t S : S_list) {
      AttnDims a = shape;
      a.S = S;
      const auto tm = runtime::cpu::attention_time_s(a, s.threads, iters);
      const double ff = runtime::attention_fwd_flops(a) / tm.fwd_s, fb = runtime::attention_bwd_flops(a) / tm.bwd_s;
      const double ef = ff / hw.bf16_dense_flops, eb = fb / hw.bf16_dense_flops;
      if (ef > 1 || eb > 1)
        throw InputError(hw.name, "bf16_dense_TFLOPs",
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
  measure(primary, s.attn_S, s.attn_iters, true);
  if (!quick)
    for (std::int64_t D : {64, 128})
      for (bool causal : {true, false}) {
        const AttnDims shape{1, 0, s.heads, s.kv_heads, D, causal};
        if (D != primary.D || causal != primary.causal) measure(shape, {256, 512, 1024}, 1, false);
      }
  out += fmt::format("\nattention '{}' per thread, {} threads at once, B=1 H_l={} H_kv_l={} (eff = of {:.1f} GFLOP/s)\n",
                     s.impl, s.threads, s.heads, s.kv_heads, hw.bf16_dense_flops / 1e9) +
         t.render();
}

// --backend cuda lives in cli/calibrate_cuda.cpp (its own flags).
bool asks_for(int argc, char** argv, const std::string& backend) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--backend=" + backend || (a == "--backend" && i + 1 < argc && std::string(argv[i + 1]) == backend)) return true;
  }
  return false;
}

bool asks_for_raw(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]).rfind("--from-raw", 0) == 0) return true;
  return false;
}

int run_calibrate(int argc, char** argv) {
  if (asks_for_raw(argc, argv)) return run_calibrate_from_raw(argc, argv);  // cli/calibrate_a2a.cpp, no GPU
  if (asks_for(argc, argv, "cuda")) return run_calibrate_cuda(argc, argv);
  if (asks_for(argc, argv, "deepspeed")) return run_calibrate_deepspeed(argc, argv);  // cli/calibrate_deepspeed.cpp
  po::options_description d("calibrate options");
  d.add_options()("help,h", "this help")
      ("backend", po::value<std::string>()->default_value("cpu"), "cpu | cuda | deepspeed (see --backend X --help)")
      ("profile", po::value<std::string>()->default_value("cpu-local"), "base profile (name or path) the section is added to")
      ("profile-out", po::value<std::string>(), "write the base profile with the `calibrated:` section here (else print the section)")
      ("sp-sizes", po::value<std::string>()->default_value("2,4"), "sp sizes (thread-ranks) of the exchange curves")
      ("threads", po::value<int>()->default_value(2), "threads running attention and pack at once (ranks on this host)")
      ("iters", po::value<int>()->default_value(9), "iterations per exchange / pack point (median)")
      ("heads-per-rank", po::value<std::int64_t>()->default_value(4), "attention shape: query heads per thread")
      ("kv-heads-per-rank", po::value<std::int64_t>()->default_value(1), "attention shape: kv heads per thread")
      ("head-dim", po::value<std::int64_t>()->default_value(64), "attention shape: D")
      ("non-causal", po::bool_switch(), "attention shape: without the causal mask")
      ("attn-implementation", po::value<std::string>()->default_value("ulysses_reference"),
       "the implementation name the attention curves are filed under (scenarios select it by plan.attn_implementation)")
      ("quick", po::bool_switch(), "fewer, smaller points (seconds; for tests)");
  const auto vm = parse_args(argc, argv, d);
  if (vm.count("help")) {
    print_help(argv[0], "--backend cpu [--profile-out FILE] [--profile cpu-local]",
               "Measures the CPU backend (all-to-all busbw vs bytes per rank per sp size, attention efficiency\n"
               "vs S, pack bandwidth) and writes them as the `calibrated:` section of a profile.",
               d);
    return kExitOk;
  }
  if (vm["backend"].as<std::string>() != "cpu")
    throw InputError("", "--backend", fmt::format("'{}' is not a backend (cpu | cuda | deepspeed)", vm["backend"].as<std::string>()));
  Setup s;
  const bool quick = vm["quick"].as<bool>();
  s.sp_sizes = parse_int_list(vm["sp-sizes"].as<std::string>(), "--sp-sizes", 2);
  s.threads = vm["threads"].as<int>();
  s.iters = vm["iters"].as<int>();
  s.heads = vm["heads-per-rank"].as<std::int64_t>();
  s.kv_heads = vm["kv-heads-per-rank"].as<std::int64_t>();
  s.head_dim = vm["head-dim"].as<std::int64_t>();
  s.causal = !vm["non-causal"].as<bool>();
  s.impl = vm["attn-implementation"].as<std::string>();
  if (s.threads < 1 || s.threads > 64) throw InputError("", "--threads", "must be 1..64");
  if (s.iters < 1) throw InputError("", "--iters", "must be >= 1");
  for (std::int64_t P : s.sp_sizes)
    if (P > 64) throw InputError("", "--sp-sizes", "thread-ranks are limited to 64");
  if (s.heads < 1 || s.kv_heads < 1 || s.heads % s.kv_heads != 0 || s.head_dim < 1)
    throw InputError("", "--heads-per-rank", "heads and kv heads per rank must be positive, heads a multiple of kv heads");
  s.a2a_bytes = quick ? std::vector<std::int64_t>{16 << 10, 256 << 10} : std::vector<std::int64_t>{16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20};
  s.attn_S = quick ? std::vector<std::int64_t>{128, 256} : std::vector<std::int64_t>{256, 512, 1024, 2048};
  if (quick) s.attn_iters = 1;

  const HardwareProfile hw = load_profile(vm["profile"].as<std::string>());  // InputError on a bad profile
  Calibration c;
  std::string out;
  c.pack_GBps = runtime::cpu::pack_GBps(s.pack_bytes, s.threads, s.iters);
  out += fmt::format("pack (seq->head, {} B per thread, {} threads at once): {:.2f} GB/s (read + write)\n\n", s.pack_bytes,
                     s.threads, c.pack_GBps);
  calibrate_a2a(s, c, out);
  calibrate_attention(s, hw, c, quick, out);
  c.provenance = fmt::format(
      "measured {} on host {} ({}, {} hardware threads) by `{}`; a2a: median over {} iterations of the max over P "
      "thread-ranks, busbw = (P-1)/P * bytes / (t - alpha - 2 * bytes / pack_GBps) with t a pack + all-to-all as in the block; attention '{}': B=1 H_l={} H_kv_l={} D={} {} on {} threads at "
      "once, eff = FLOPs / t / bf16_dense_flops of profile {} ({:.1f} GFLOP/s); pack: {} B per thread on {} threads",
      utc_now(), host_name(), runtime::cpu::host_cpu_model(), std::thread::hardware_concurrency(), command_line(argc, argv),
      s.iters, s.impl, s.heads, s.kv_heads, s.head_dim, s.causal ? "causal" : "non-causal", s.threads, hw.name,
      hw.bf16_dense_flops / 1e9, s.pack_bytes, s.threads);
  std::cout << out << "\n";
  write_calibration_output(vm, hw.name, c);
  return kExitOk;
}

const RegisterCommand reg{"calibrate", "microbenchmarks -> the calibrated: section of a hardware profile", &run_calibrate};

}  // namespace
}  // namespace ulysses::cli
