// runtime/power_sampler.hpp: NVML opened with dlopen, one sampling thread, the summary of a run's samples.
#include "runtime/power_sampler.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iterator>
#include <set>

#include <fmt/format.h>

#include "core/stats.hpp"

namespace ulysses::runtime {

PowerSummary summarize_power(const std::vector<PowerSample>& s, double limit_w) {
  PowerSummary r;
  r.limit_w = limit_w;
  r.samples = static_cast<std::int64_t>(s.size());
  if (!(limit_w > 0)) {
    r.why = "no enforced power limit read";
    return r;
  }
  std::vector<double> mhz;
  std::set<int> gpus;
  double watts = 0;
  std::int64_t at_cap = 0;
  for (const auto& x : s) {
    if (x.watts < kLoadedFraction * limit_w) continue;
    mhz.push_back(x.sm_mhz);
    gpus.insert(x.gpu);
    watts += x.watts;
    at_cap += x.watts >= kAtCapFraction * limit_w;
  }
  if (mhz.empty()) {
    r.why = fmt::format("no sample at >= {:.0f} W ({} samples)", kLoadedFraction * limit_w, s.size());
    return r;
  }
  r.available = true;
  r.gpus = static_cast<int>(gpus.size());
  r.loaded = static_cast<std::int64_t>(mhz.size());
  const std::size_t n = mhz.size();
  r.sm_mhz_median = core::median(mhz);
  r.sm_mhz_min = *std::min_element(mhz.begin(), mhz.end());
  r.watts_mean = watts / double(n);
  r.at_cap_fraction = double(at_cap) / double(n);
  return r;
}

// The NVML entry points used (nvml.h: nvmlReturn_t is an int, 0 success; nvmlDevice_t a pointer). The energy
// counter's two are optional: without them the sampler still works.
struct PowerSampler::Nvml {
  using Dev = void*;
  void* lib = nullptr;
  int (*shutdown)() = nullptr;
  int (*handle)(unsigned, Dev*) = nullptr;
  int (*clock)(Dev, int, unsigned*) = nullptr;  // NVML_CLOCK_SM = 1
  int (*power)(Dev, unsigned*) = nullptr;       // milliwatts
  int (*by_pci)(const char*, Dev*) = nullptr;            // nvmlDeviceGetHandleByPciBusId_v2
  int (*energy)(Dev, unsigned long long*) = nullptr;     // nvmlDeviceGetTotalEnergyConsumption, millijoules
  std::vector<Dev> devs;
  double limit_w = 0;
  std::string why;

  Nvml() {
    const char* path = std::getenv("ULYSSES_NVML_LIB");  // a stand-in (tests/runtime/fake_nvml.cpp), else the driver's
    lib = dlopen(path ? path : "libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      why = path ? fmt::format("ULYSSES_NVML_LIB: cannot open {}", path) : "no libnvidia-ml.so.1 (no NVIDIA driver on this host)";
      return;
    }
    auto init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
    auto count = reinterpret_cast<int (*)(unsigned*)>(dlsym(lib, "nvmlDeviceGetCount_v2"));
    auto limit = reinterpret_cast<int (*)(Dev, unsigned*)>(dlsym(lib, "nvmlDeviceGetEnforcedPowerLimit"));
    shutdown = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlShutdown"));
    handle = reinterpret_cast<int (*)(unsigned, Dev*)>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
    clock = reinterpret_cast<int (*)(Dev, int, unsigned*)>(dlsym(lib, "nvmlDeviceGetClockInfo"));
    power = reinterpret_cast<int (*)(Dev, unsigned*)>(dlsym(lib, "nvmlDeviceGetPowerUsage"));
    by_pci = reinterpret_cast<int (*)(const char*, Dev*)>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    energy = reinterpret_cast<int (*)(Dev, unsigned long long*)>(dlsym(lib, "nvmlDeviceGetTotalEnergyConsumption"));
    if (!init || !count || !limit || !shutdown || !handle || !clock || !power) {
      why = "libnvidia-ml.so.1 lacks an NVML entry point";
      shutdown = nullptr;  // nothing initialized
      return;
    }
    unsigned n = 0;
    if (init() != 0) {
      why = "nvmlInit_v2 failed";
      shutdown = nullptr;
      return;
    }
    if (count(&n) != 0 || n == 0) {
      why = "NVML sees no GPU";
      return;
    }
    for (unsigned i = 0; i < n; ++i) {
      Dev d = nullptr;
      unsigned mw = 0;
      if (handle(i, &d) != 0) continue;
      devs.push_back(d);
      if (limit(d, &mw) == 0) limit_w = std::max(limit_w, mw / 1e3);
    }
    if (devs.empty()) why = "NVML gave no device handle";
  }
  ~Nvml() {
    if (shutdown) shutdown();
    if (lib) dlclose(lib);
  }
  bool ok() const { return !devs.empty(); }
};

PowerSampler::PowerSampler(int period_ms) : nvml_(std::make_unique<Nvml>()), period_ms_(std::max(1, period_ms)) {
  limit_w_ = nvml_->limit_w;
}

PowerSampler::~PowerSampler() {
  if (running_.exchange(false) && thread_.joinable()) thread_.join();
}

void PowerSampler::start() {
  if (!nvml_->ok() || running_.exchange(true)) return;
  samples_.clear();
  t0_ = std::chrono::steady_clock::now();
  thread_ = std::thread([this] {
    while (running_.load()) {
      for (std::size_t i = 0; i < nvml_->devs.size(); ++i) {
        unsigned mhz = 0, mw = 0;
        if (nvml_->clock(nvml_->devs[i], 1, &mhz) != 0) continue;
        const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();  // at the clock's read
        if (nvml_->power(nvml_->devs[i], &mw) == 0) samples_.push_back({t, static_cast<int>(i), double(mhz), mw / 1e3});
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(period_ms_));
    }
  });
}

PowerSummary PowerSampler::stop() {
  if (!nvml_->ok()) {
    PowerSummary r;
    r.why = nvml_->why;
    return r;
  }
  if (running_.exchange(false) && thread_.joinable()) thread_.join();
  return summarize_power(samples_, limit_w_);
}

std::string PowerSampler::unavailable() const { return nvml_->ok() ? std::string() : nvml_->why; }

int PowerSampler::index_of(const std::string& pci_bus_id) const {
  Nvml::Dev d = nullptr;
  if (!nvml_->ok() || !nvml_->by_pci || nvml_->by_pci(pci_bus_id.c_str(), &d) != 0) return -1;
  for (std::size_t i = 0; i < nvml_->devs.size(); ++i)
    if (nvml_->devs[i] == d) return static_cast<int>(i);
  return -1;
}

std::vector<ClockWindow> windows_after(double start_s, const std::vector<std::pair<std::string, double>>& segments) {
  std::vector<ClockWindow> out;
  double t = start_s;
  for (const auto& [name, sec] : segments) {
    out.push_back({name, t, t + sec});
    t += sec;
  }
  return out;
}

std::map<std::string, WindowClock> clock_in_windows(const std::vector<PowerSample>& s, int gpu, const std::vector<ClockWindow>& w) {
  std::vector<const ClockWindow*> by_begin;  // the windows do not overlap: a sample lies in the last one begun before it
  for (const ClockWindow& c : w) by_begin.push_back(&c);
  std::sort(by_begin.begin(), by_begin.end(), [](const ClockWindow* a, const ClockWindow* b) { return a->begin_s < b->begin_s; });
  std::map<std::string, std::vector<double>> in;
  std::map<std::string, double> watts;
  for (const PowerSample& x : s) {
    if (x.gpu != gpu) continue;
    const auto it = std::upper_bound(by_begin.begin(), by_begin.end(), x.t_s,
                                     [](double t, const ClockWindow* c) { return t < c->begin_s; });
    if (it == by_begin.begin()) continue;
    const ClockWindow& c = **std::prev(it);
    if (x.t_s < c.end_s) in[c.name].push_back(x.sm_mhz), watts[c.name] += x.watts;
  }
  std::map<std::string, WindowClock> out;
  for (auto& [name, v] : in) out[name] = {static_cast<std::int64_t>(v.size()), core::median(v), watts[name] / double(v.size())};
  return out;
}

EnergyCounter::EnergyCounter(const std::string& pci_bus_id) : nvml_(std::make_unique<PowerSampler::Nvml>()) {
  if (nvml_->ok() && nvml_->by_pci && nvml_->energy && nvml_->by_pci(pci_bus_id.c_str(), &dev_) != 0) dev_ = nullptr;
}

EnergyCounter::~EnergyCounter() = default;

double EnergyCounter::joules() const {
  unsigned long long mj = 0;
  if (!dev_ || nvml_->energy(dev_, &mj) != 0) return -1;
  return double(mj) / 1e3;
}

}  // namespace ulysses::runtime
