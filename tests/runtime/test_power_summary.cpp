// runtime/power_sampler.hpp without a GPU: the summary of a run's samples (loaded ones only, the GPUs counted
// that were loaded, median and lowest clock, mean power, the share at the cap), why a run has none, the clock per
// phase window (`run --scope step`'s column), a GPU's NVML index by its bus id, and `bench step`'s power table
// with a backend that was not sampled.
#include <catch2/catch.hpp>

#include "runtime/power_sampler.hpp"
#include "bench/step_bench.hpp"

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

using ulysses::runtime::PowerSample;
using ulysses::runtime::summarize_power;

TEST_CASE("power summary: loaded samples only, median and lowest clock, mean power, share at the cap", "[bench][power]") {
  // limit 700 W: loaded from 280 W, at the cap from 679 W; GPU 1 idles (never loaded), GPU 0 steps
  const std::vector<PowerSample> s = {{0.00, 0, 1980, 120}, {0.00, 1, 1980, 70},  {0.03, 0, 1400, 700},
                                      {0.03, 1, 1980, 71},  {0.05, 0, 1300, 690}, {0.05, 1, 1980, 70},
                                      {0.08, 0, 1500, 600}, {0.10, 0, 1600, 280}, {0.12, 0, 1980, 279}};
  const auto p = summarize_power(s, 700);
  REQUIRE(p.available);
  CHECK(p.gpus == 1);
  CHECK(p.samples == 9);
  CHECK(p.loaded == 4);                            // 700, 690, 600, 280 W (279 W is below 40 % of 700)
  CHECK(p.sm_mhz_median == Approx(1450));          // even count: the mean of 1400 and 1500
  CHECK(p.sm_mhz_min == 1300);
  CHECK(p.watts_mean == Approx((700 + 690 + 600 + 280) / 4.0));
  CHECK(p.at_cap_fraction == Approx(0.5));         // 700 and 690 W
  CHECK(p.limit_w == 700);
  const auto odd = summarize_power({{0, 0, 1200, 650}, {0, 1, 1300, 650}, {0, 1, 1900, 650}}, 700);
  CHECK(odd.sm_mhz_median == 1300);
  CHECK(odd.gpus == 2);
}

TEST_CASE("power summary: no loaded sample or no limit is not available, and says why", "[bench][power]") {
  const auto idle = summarize_power({{0, 0, 1980, 120}, {0.1, 0, 1980, 121}}, 700);
  CHECK(!idle.available);
  CHECK(idle.why == "no sample at >= 280 W (2 samples)");
  CHECK(idle.loaded == 0);
  CHECK(idle.sm_mhz_median == 0);
  const auto nolimit = summarize_power({{0, 0, 1500, 650}}, 0);
  CHECK(!nolimit.available);
  CHECK(nolimit.why == "no enforced power limit read");
  // the sampler itself: on a host without NVML it is not available and says why; with a driver, an idle
  // start/stop may have no loaded sample, which also says why
  ulysses::runtime::PowerSampler sampler(5);
  sampler.start();
  const auto p = sampler.stop();
  if (!p.available) CHECK(!p.why.empty());
}

namespace {
struct NvmlLib {  // ULYSSES_NVML_LIB for one test, unset after it
  explicit NvmlLib(const char* path) { setenv("ULYSSES_NVML_LIB", path, 1); }
  ~NvmlLib() { unsetenv("ULYSSES_NVML_LIB"); }
};
}  // namespace

TEST_CASE("power sampler: NVML's stand-in gives the loaded GPU's clock and power, not the idle one's", "[bench][power]") {
  // tests/runtime/fake_nvml.cpp: GPU 0 at 1400 MHz and 690 W of 700 W, GPU 1 idle at 1980 MHz and 70 W
  const NvmlLib lib(ULYSSES_FAKE_NVML);
  ulysses::runtime::PowerSampler sampler(2);
  sampler.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  const auto p = sampler.stop();
  INFO(p.why);
  REQUIRE(p.available);
  CHECK(p.limit_w == 700);
  CHECK(p.gpus == 1);                 // the idle GPU's samples are never loaded
  CHECK(p.samples >= 2 * p.loaded);   // both GPUs read at every tick
  CHECK(p.loaded >= 3);
  CHECK(p.sm_mhz_median == 1400);
  CHECK(p.sm_mhz_min == 1400);
  CHECK(p.watts_mean == Approx(690));
  CHECK(p.at_cap_fraction == 1);      // 690 W is within 3 % of 700
  // stop without start, twice: a summary of no samples, no hang
  ulysses::runtime::PowerSampler idle(2);
  CHECK(!idle.stop().available);
  CHECK(!idle.stop().available);
}

TEST_CASE("energy counter: joules of the GPU named by its PCI bus id, -1 for one NVML does not know", "[bench][power]") {
  const NvmlLib lib(ULYSSES_FAKE_NVML);  // GPU 0000:19:00.0's counter grows by 250 J per read
  const ulysses::runtime::EnergyCounter e("0000:19:00.0");
  const double a = e.joules(), b = e.joules();
  CHECK(a >= 5000);
  CHECK(b - a == Approx(250));
  CHECK(ulysses::runtime::EnergyCounter("0000:3b:00.0").joules() == -1);
  const NvmlLib none("/nonexistent/libnvidia-ml.so.1");
  CHECK(ulysses::runtime::EnergyCounter("0000:19:00.0").joules() == -1);
}

TEST_CASE("power sampler: a ULYSSES_NVML_LIB that does not open is not available and says so", "[bench][power]") {
  const NvmlLib lib("/nonexistent/libnvidia-ml.so.1");
  ulysses::runtime::PowerSampler sampler(2);
  sampler.start();
  const auto p = sampler.stop();
  CHECK(!p.available);
  CHECK(p.why == "ULYSSES_NVML_LIB: cannot open /nonexistent/libnvidia-ml.so.1");
}

TEST_CASE("bench step: the power table has a row per sampled backend and says why one was not", "[bench][power]") {
  ulysses::bench::StepBench b;
  ulysses::bench::StepBenchRow ours, peer;
  ours.backend = "cuda";
  ours.power = summarize_power({{0, 0, 1402, 672}, {0.1, 0, 1402, 700}}, 700);
  peer.backend = "deepspeed";
  peer.power.why = "no libnvidia-ml.so.1 (no NVIDIA driver on this host)";
  b.rows = {ours, peer};
  const std::string t = ulysses::bench::step_power_table(b);
  INFO(t);
  CHECK(t.find("of the 700 W limit") != std::string::npos);
  CHECK(t.find("(MHz)") != std::string::npos);  // the units row
  CHECK(t.find("   cuda") != std::string::npos);
  CHECK(t.find("1402") != std::string::npos);
  CHECK(t.find("686.0") != std::string::npos);   // mean of 672 and 700 W
  CHECK(t.find("deepspeed: not sampled (no libnvidia-ml.so.1") != std::string::npos);
  CHECK(t.find("cuda not measured; deepspeed not measured\n") != std::string::npos);
  // energies: 8192 tokens per step on one GPU each; ours 0.5 s and 400 J, the peer 1 s and 640 J
  for (auto* r : {&b.rows[0], &b.rows[1]}) r->m.losses = {1.0}, r->m.ranks = 1;
  b.rows[0].m.step_median_s = 0.5, b.rows[0].c.tokens_per_gpu.measured = 8192 / 0.5, b.rows[0].m.energy_j_per_step = 400;
  b.rows[1].m.step_median_s = 1.0, b.rows[1].c.tokens_per_gpu.measured = 8192 / 1.0, b.rows[1].m.energy_j_per_step = 640;
  CHECK(b.rows[0].tokens_per_joule() == Approx(20.48));
  CHECK(b.rows[1].tokens_per_joule() == Approx(12.8));
  const std::string e = ulysses::bench::step_power_table(b);
  INFO(e);
  CHECK(e.find("cuda 400.0 J per step (800 W per GPU), 20.5 tokens/J; deepspeed 640.0 J per step (640 W per GPU), 12.8 tokens/J\n") !=
        std::string::npos);
  CHECK(e.find("tokens per joule, cuda / deepspeed: 1.600x\n") != std::string::npos);
  CHECK(e.find("power limit") == std::string::npos);  // the peer's 640 W is below 97 % of 700
  b.rows[1].m.energy_j_per_step = 690;                  // both at the limit now: the ratio is one per joule
  const std::string cap = ulysses::bench::step_power_table(b);
  INFO(cap);
  CHECK(cap.find("both timed steps at the 700 W power limit: the tokens/s ratio is one of work per joule") != std::string::npos);
  b.rows[1].m.energy_j_per_step = 640;
  b.rows[1].m.energy_j_per_step = -1;  // one side not measured: no ratio
  CHECK(ulysses::bench::step_power_table(b).find("tokens per joule") == std::string::npos);
  b.rows[0].power = {};
  b.rows[0].power.why = "the cpu backend";
  const std::string none = ulysses::bench::step_power_table(b);
  CHECK(none.rfind("power: cuda: not sampled (the cpu backend)\n  deepspeed: not sampled", 0) == 0);
}

TEST_CASE("clock in windows: per phase, the median clock of one GPU's samples inside its windows", "[bench][power]") {
  using ulysses::runtime::ClockWindow;
  // GPU 0 sampled every 1/64 s at 1400, 1500, ... MHz and 600, 610, ... W, GPU 1 at 1980 throughout (another GPU of the host); times in
  // 64ths of a second, exact in binary, so the windows' edges are exact
  std::vector<PowerSample> s;
  for (int i = 0; i < 10; ++i) {
    s.push_back({i / 64.0, 0, 1400.0 + 100 * i, 600.0 + 10 * i});
    s.push_back({i / 64.0, 1, 1980, 70});
  }
  // attn.bwd twice (two timed steps): [1, 3) holds samples 1, 2; [5, 7) holds 5, 6. mlp.fwd's window holds no
  // sample (shorter than the period): absent, not 0. other: [3, 4) holds 3; its end is open, so not 4.
  const std::vector<ClockWindow> w = {{"attn.bwd", 1 / 64.0, 3 / 64.0}, {"mlp.fwd", 3.2 / 64, 3.8 / 64},
                                      {"attn.bwd", 5 / 64.0, 7 / 64.0}, {"other", 3 / 64.0, 4 / 64.0}};
  const auto c = ulysses::runtime::clock_in_windows(s, 0, w);
  REQUIRE(c.count("attn.bwd"));
  CHECK(c.at("attn.bwd").samples == 4);
  CHECK(c.at("attn.bwd").sm_mhz_median == Approx((1600 + 1900) / 2.0));  // 1500, 1600, 1900, 2000
  CHECK(c.at("attn.bwd").watts_mean == Approx((610 + 620 + 650 + 660) / 4.0));
  CHECK(c.count("mlp.fwd") == 0);
  REQUIRE(c.count("other"));
  CHECK(c.at("other").samples == 1);
  CHECK(c.at("other").sm_mhz_median == 1700);
  CHECK(c.at("other").watts_mean == Approx(630));
  CHECK(ulysses::runtime::clock_in_windows(s, 1, w).at("other").sm_mhz_median == 1980);
  CHECK(ulysses::runtime::clock_in_windows(s, -1, w).empty());  // no GPU matched: nothing measured
}

TEST_CASE("power sampler: the NVML index of a PCI bus id, -1 for one NVML does not know", "[bench][power]") {
  const NvmlLib lib(ULYSSES_FAKE_NVML);  // 0000:19:00.0 is the stand-in's first GPU
  const ulysses::runtime::PowerSampler sampler(2);
  CHECK(sampler.index_of("0000:19:00.0") == 0);
  CHECK(sampler.index_of("0000:3b:00.0") == -1);
  const NvmlLib none("/nonexistent/libnvidia-ml.so.1");
  CHECK(ulysses::runtime::PowerSampler(2).index_of("0000:19:00.0") == -1);
}

TEST_CASE("windows after: back-to-back segments from a start, in seconds", "[bench][power]") {
  // run_step: the step's first phase begins lead_ms after the anchor, which the host saw at anchor_s
  const auto w = ulysses::runtime::windows_after(2.5, {{"embed.fwd", 0.001}, {"attn.fwd", 0.25}, {"embed.fwd", 0.002}});
  REQUIRE(w.size() == 3);
  CHECK(w[0].name == "embed.fwd");
  CHECK(w[0].begin_s == 2.5);
  CHECK(w[0].end_s == Approx(2.501));
  CHECK(w[1].begin_s == Approx(2.501));
  CHECK(w[1].end_s == Approx(2.751));
  CHECK(w[2].begin_s == Approx(2.751));
  CHECK(w[2].end_s == Approx(2.753));
  CHECK(ulysses::runtime::windows_after(1, {}).empty());
}
