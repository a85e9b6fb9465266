// Lab: our kernels timed under several starting conditions, with NVML's SM clock and board power over each:
// `gemm`, our cuBLASLt GEMMs (calib/cuda/gemm_rates.hpp, the calls the step runner makes); `attn`, our flash
// attention forward and backward (calib/cuda/microbench.hpp attention_time). Conditions: back to back as `calibrate`
// times them (burst), after the GPU idles, after memory-bound work queued before each call, after a longer warm-up
// at full load. The question: which condition gives the rates the same kernels reach inside the step, where they
// alternate with one another and with norms and elementwise kernels (docs/STEP_POWER.md "Kernels alone, after
// what"). Outputs are checked before they are timed (GEMMs against fp64, attention's lse finite; a failed check
// exits 1).
//
// usage: kernel_conditions gemm|attn [conditions] [sizes] [profile]
//   conditions: comma-separated, each "burst", "idle:<ms>", "lead:<fills>" (gemm only: writes of a 256 MiB buffer)
//               or "warm:<calls>" (that many untimed calls first); default burst,idle:2,idle:20,lead:20,lead:50 (gemm),
//               burst,warm:30,idle:20 (attn)
//   sizes: comma-separated tokens, M of the GEMMs (default 8192,16384,32768,65536) or S of attention (default
//          8192,16384,65536); profile: the hardware profile whose bf16 dense peak eff is of (default h100-sxm-80gb)
// Shapes: Llama-3.1-8B's q, gate/up and down GEMMs; its attention (32 query heads, 8 kv heads, D 128, causal).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "calib/cuda/gemm_rates.hpp"
#include "calib/cuda/microbench.hpp"
#include "runtime/power_sampler.hpp"
#include "sim/config.hpp"

namespace {

struct Condition {
  std::string name;
  double idle_s = 0;
  int lead_fills = 0;
  int warm = -1;  // untimed calls first (-1: the calibration's own count)
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string part; std::getline(in, part, ',');)
    if (!part.empty()) out.push_back(part);
  return out;
}

bool parse_condition(const std::string& s, bool gemm, Condition& c) {
  c = {s, 0, 0, -1};
  if (s == "burst") return true;
  char* end = nullptr;
  if (s.rfind("idle:", 0) == 0) {
    const double ms = std::strtod(s.c_str() + 5, &end);
    c.idle_s = ms * 1e-3;
    return *end == '\0' && ms > 0 && ms <= 1000;
  }
  if (s.rfind("lead:", 0) == 0 && gemm) {
    const long n = std::strtol(s.c_str() + 5, &end, 10);
    c.lead_fills = static_cast<int>(n);
    return *end == '\0' && n > 0 && n <= 1000;
  }
  if (s.rfind("warm:", 0) == 0) {
    const long n = std::strtol(s.c_str() + 5, &end, 10);
    c.warm = static_cast<int>(n);
    return *end == '\0' && n >= 0 && n <= 1000;
  }
  return false;
}

// The power sampler's summary of one condition, one line.
void print_clock(const std::string& name, const ulysses::runtime::PowerSummary& p) {
  if (p.available)
    std::printf("# condition %s clock: sm median %.0f MHz, lowest %.0f MHz, mean power %.0f W, %.0f %% at the cap, "
                "%lld of %lld samples loaded\n",
                name.c_str(), p.sm_mhz_median, p.sm_mhz_min, p.watts_mean, 100 * p.at_cap_fraction, static_cast<long long>(p.loaded),
                static_cast<long long>(p.samples));
  else
    std::printf("# condition %s clock: not measured (%s)\n", name.c_str(), p.why.c_str());
  std::fflush(stdout);
}

void run_gemm(const Condition& c, const std::vector<std::int64_t>& M, double peak) {
  ulysses::calib::cuda::GemmCalibration g;
  g.NK = {{4096, 4096}, {14336, 4096}, {4096, 14336}};
  g.M = M;
  g.idle_s = c.idle_s;
  g.lead_fills = c.lead_fills;
  if (c.warm >= 0) g.warmup = c.warm;
  ulysses::runtime::PowerSampler sampler(10);
  sampler.start();
  std::string report;
  ulysses::calib::cuda::ulysses_gemm_curves(peak, g, report);
  const ulysses::runtime::PowerSummary p = sampler.stop();
  std::printf("# condition %s: eff = 2 M N K / t / %.1f TFLOP/s, median of %d after %d\n", c.name.c_str(), peak / 1e12, g.iters,
              g.warmup);
  std::fputs(report.c_str(), stdout);
  print_clock(c.name, p);
}

void run_attn(const Condition& c, const std::vector<std::int64_t>& S, double peak) {
  constexpr int kIters = 3;  // as calibrate: median of 3 after 1
  const int warm = c.warm >= 0 ? c.warm : 1;
  ulysses::runtime::PowerSampler sampler(10);
  sampler.start();
  std::string report;
  for (std::int64_t s : S) {
    const auto t = ulysses::calib::cuda::attention_time("flash", s, 32, 8, 128, true, warm, kIters, 0, c.idle_s);
    report += fmt::format("  S={:<7} fwd {:9.3f} ms eff {:.3f}   bwd {:9.3f} ms eff {:.3f}\n", s, t.fwd_s * 1e3,
                          t.fwd_flops / t.fwd_s / peak, t.bwd_s * 1e3, t.bwd_flops / t.bwd_s / peak);
  }
  const ulysses::runtime::PowerSummary p = sampler.stop();
  std::printf("# condition %s: flash attention H=32 H_kv=8 D=128 causal, eff = FLOPs / t / %.1f TFLOP/s, median of %d after %d\n",
              c.name.c_str(), peak / 1e12, kIters, warm);
  std::fputs(report.c_str(), stdout);
  print_clock(c.name, p);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "";
  if (what != "gemm" && what != "attn") {
    std::fprintf(stderr, "usage: kernel_conditions gemm|attn [conditions] [sizes] [profile]\n");
    return 2;
  }
  const bool gemm = what == "gemm";
  const std::string conds = argc > 2 ? argv[2] : gemm ? "burst,idle:2,idle:20,lead:20,lead:50" : "burst,warm:30,idle:20";
  const std::string sizes = argc > 3 ? argv[3] : gemm ? "8192,16384,32768,65536" : "8192,16384,65536";
  std::vector<Condition> conditions;
  for (const std::string& s : split(conds)) {
    Condition c;
    if (!parse_condition(s, gemm, c)) {
      std::fprintf(stderr,
                   "kernel_conditions: condition '%s': want burst, idle:<ms> (0 < ms <= 1000), warm:<calls> (0..1000)%s\n",
                   s.c_str(), gemm ? " or lead:<fills> (1..1000)" : "");
      return 2;
    }
    conditions.push_back(c);
  }
  std::vector<std::int64_t> n;
  for (const std::string& s : split(sizes)) {
    char* end = nullptr;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (*end != '\0' || v < 1 || v > (1 << 20)) {
      std::fprintf(stderr, "kernel_conditions: size '%s': want a whole number of tokens in 1..1048576\n", s.c_str());
      return 2;
    }
    n.push_back(v);
  }
  double peak = 0;
  try {
    peak = ulysses::load_profile(argc > 4 ? argv[4] : "h100-sxm-80gb").bf16_dense_flops;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kernel_conditions: %s\n", e.what());
    return 2;
  }
  try {
    for (const Condition& c : conditions) gemm ? run_gemm(c, n, peak) : run_attn(c, n, peak);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kernel_conditions: %s\n", e.what());
    return 1;
  }
  return 0;
}
