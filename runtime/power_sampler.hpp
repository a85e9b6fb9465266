#pragma once
// The GPUs' SM clock, board power and energy while a bench runs, read from NVML (libnvidia-ml.so.1, opened at run
// time: no build dependency, none on a host without the driver; the environment's ULYSSES_NVML_LIB names another
// library with NVML's entry points instead, as the CPU tests do with tests/runtime/fake_nvml.cpp). A whole step of
// long-context training draws the board's power limit on an H100 (700 W): the SM clock then falls below its boost
// clock, by how much depends on the work, so two steps compared at the same power compare their work per joule, not
// their kernels' peak rates (docs/STEP_POWER.md). `bench step` samples each backend's run.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace ulysses::runtime {

struct PowerSample {
  double t_s = 0;        // since the sampler started
  int gpu = 0;           // NVML index
  double sm_mhz = 0;     // nvmlDeviceGetClockInfo(NVML_CLOCK_SM)
  double watts = 0;      // nvmlDeviceGetPowerUsage (the driver's averaged board power)
};

// What a run's samples say: `loaded` are the samples at >= loaded_fraction of the GPU's enforced limit (the steps,
// not their setup or the host's work between them); clock and power over those; the share within 3 % of the limit.
struct PowerSummary {
  bool available = false;  // false: no NVML (no driver, a CPU host) or no sample; every number below is 0
  std::string why;         // when not available: one line
  int gpus = 0;            // GPUs with a loaded sample
  double limit_w = 0;      // the enforced power limit (max over the sampled GPUs)
  std::int64_t samples = 0, loaded = 0;
  double sm_mhz_median = 0, sm_mhz_min = 0, watts_mean = 0, at_cap_fraction = 0;
};

constexpr double kLoadedFraction = 0.4;  // of the limit: 280 W of 700; idle H100s/H200s draw 70-130 W
constexpr double kAtCapFraction = 0.97;

PowerSummary summarize_power(const std::vector<PowerSample>& s, double limit_w);

// The SM clock over named windows of one GPU's samples (times on the samples' clock, seconds): per name, the median
// clock (and the mean power) of the samples of NVML index `gpu` whose time lies in one of that name's windows [begin_s, end_s). The
// windows do not overlap (a run's phases, one after another). A name none of whose windows holds a sample is absent
// (a window shorter than the sampling period may hold none). windows_after: back-to-back segments (name, seconds)
// as windows from start_s on.
struct ClockWindow {
  std::string name;
  double begin_s = 0, end_s = 0;
};
struct WindowClock {
  std::int64_t samples = 0;
  double sm_mhz_median = 0;
  double watts_mean = 0;  // the board power over the same samples
};
std::vector<ClockWindow> windows_after(double start_s, const std::vector<std::pair<std::string, double>>& segments);
std::map<std::string, WindowClock> clock_in_windows(const std::vector<PowerSample>& s, int gpu, const std::vector<ClockWindow>& w);

// Samples every GPU NVML sees every period_ms on its own thread from start() to stop() (NVML's order need not be
// CUDA's, and an idle GPU's samples are never loaded, so all are read); summarize_power counts the GPUs that were
// loaded. On a host shared with other jobs their GPUs' load would count too: the lent machines are not shared.
// Without NVML, stop() gives a summary with available = false and why.
class PowerSampler {
 public:
  struct Nvml;  // libnvidia-ml.so.1 opened and initialized, the entry points used (power_sampler.cpp)
  explicit PowerSampler(int period_ms = 25);
  ~PowerSampler();
  PowerSampler(const PowerSampler&) = delete;
  PowerSampler& operator=(const PowerSampler&) = delete;
  void start();
  PowerSummary stop();
  // after stop(): every sample, its t_s since started_at() (the host's steady clock)
  const std::vector<PowerSample>& samples() const { return samples_; }
  std::chrono::steady_clock::time_point started_at() const { return t0_; }
  // the NVML index of the GPU with this PCI bus id (cudaDeviceGetPCIBusId's form); -1 without NVML or that GPU
  int index_of(const std::string& pci_bus_id) const;
  // why nothing can be sampled (no NVML, no GPU): one line; empty when NVML is there
  std::string unavailable() const;

 private:
  std::unique_ptr<Nvml> nvml_;
  int period_ms_;
  double limit_w_ = 0;
  std::chrono::steady_clock::time_point t0_{};
  std::vector<PowerSample> samples_;
  std::atomic<bool> running_{false};
  std::thread thread_;
};

// One GPU's energy counter (nvmlDeviceGetTotalEnergyConsumption: millijoules since the driver loaded, Volta and
// later), the GPU named by its PCI bus id as CUDA gives it (cudaDeviceGetPCIBusId, e.g. "0000:19:00.0"). joules()
// is < 0 where NVML, the GPU or its counter is missing: the caller reports "not measured", never 0.
class EnergyCounter {
 public:
  explicit EnergyCounter(const std::string& pci_bus_id);
  ~EnergyCounter();
  EnergyCounter(const EnergyCounter&) = delete;
  EnergyCounter& operator=(const EnergyCounter&) = delete;
  double joules() const;

 private:
  std::unique_ptr<PowerSampler::Nvml> nvml_;
  void* dev_ = nullptr;
};

}  // namespace ulysses::runtime
