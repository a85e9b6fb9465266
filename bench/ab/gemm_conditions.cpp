// Lab: our cuBLASLt GEMMs (calib/cuda/gemm_rates.hpp, the calls the step runner makes) timed under several starting
// conditions, with NVML's SM clock and board power over each: back to back as `calibrate` has timed them, after
// the GPU idles, and after memory-bound work queued just before each call. The question it answers: which
// condition gives the efficiency the same GEMMs reach inside the step, where they alternate with norms, elementwise
// kernels and attention (docs/VALIDATION.md: the step's mlp.fwd ran 9-22 % faster than the back-to-back curves).
// Every pass's output is checked against fp64 before it is timed (ulysses_gemm_curves throws otherwise).
//
// usage: gemm_conditions [conditions] [M list]
//   conditions: comma-separated, each "burst", "idle:<ms>" or "lead:<fills>" (default
//               burst,idle:2,idle:20,lead:20,lead:50); M list: comma-separated tokens (default 8192,16384,32768,65536)
// Shapes: Llama-3.1-8B's q, gate/up and down. Prints one table per condition and its clock; exit 1 on a failed check.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "calib/cuda/gemm_rates.hpp"
#include "runtime/power_sampler.hpp"

namespace {

struct Condition {
  std::string name;
  double idle_s = 0;
  int lead_fills = 0;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string part; std::getline(in, part, ',');)
    if (!part.empty()) out.push_back(part);
  return out;
}

bool parse_condition(const std::string& s, Condition& c) {
  c = {s, 0, 0};
  if (s == "burst") return true;
  char* end = nullptr;
  if (s.rfind("idle:", 0) == 0) {
    const double ms = std::strtod(s.c_str() + 5, &end);
    c.idle_s = ms * 1e-3;
    return *end == '\0' && ms > 0 && ms <= 1000;
  }
  if (s.rfind("lead:", 0) == 0) {
    const long n = std::strtol(s.c_str() + 5, &end, 10);
    c.lead_fills = static_cast<int>(n);
    return *end == '\0' && n > 0 && n <= 1000;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string conds = argc > 1 ? argv[1] : "burst,idle:2,idle:20,lead:20,lead:50";
  const std::string ms = argc > 2 ? argv[2] : "8192,16384,32768,65536";
  std::vector<Condition> conditions;
  for (const std::string& s : split(conds)) {
    Condition c;
    if (!parse_condition(s, c)) {
      std::fprintf(stderr, "gemm_conditions: condition '%s': want burst, idle:<ms> (0 < ms <= 1000) or lead:<fills> (1..1000)\n",
                   s.c_str());
      return 2;
    }
    conditions.push_back(c);
  }
  std::vector<std::int64_t> M;
  for (const std::string& s : split(ms)) {
    char* end = nullptr;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (*end != '\0' || v < 1 || v > (1 << 20)) {
      std::fprintf(stderr, "gemm_conditions: M '%s': want a whole number of tokens in 1..1048576\n", s.c_str());
      return 2;
    }
    M.push_back(v);
  }
  constexpr double kPeak = 989.4e12;  // H100 SXM bf16 dense, as profiles/h100-sxm-80gb.yaml
  try {
    for (const Condition& c : conditions) {
      ulysses::calib::cuda::GemmCalibration g;
      g.NK = {{4096, 4096}, {14336, 4096}, {4096, 14336}};
      g.M = M;
      g.idle_s = c.idle_s;
      g.lead_fills = c.lead_fills;
      ulysses::runtime::PowerSampler sampler(10);
      sampler.start();
      std::string report;
      ulysses::calib::cuda::ulysses_gemm_curves(kPeak, g, report);
      const ulysses::runtime::PowerSummary p = sampler.stop();
      std::printf("# condition %s: eff = 2 M N K / t / %.1f TFLOP/s, median of %d after %d\n", c.name.c_str(), kPeak / 1e12,
                  g.iters, g.warmup);
      std::fputs(report.c_str(), stdout);
      if (p.available)
        std::printf("# condition %s clock: sm median %.0f MHz, lowest %.0f MHz, mean power %.0f W, %.0f %% at the cap, "
                    "%lld of %lld samples loaded\n",
                    c.name.c_str(), p.sm_mhz_median, p.sm_mhz_min, p.watts_mean, 100 * p.at_cap_fraction,
                    static_cast<long long>(p.loaded), static_cast<long long>(p.samples));
      else
        std::printf("# condition %s clock: not measured (%s)\n", c.name.c_str(), p.why.c_str());
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gemm_conditions: %s\n", e.what());
    return 1;
  }
  return 0;
}
