#pragma once
// The SM clock and board power while each calibration point ran: NVML sampled every 10 ms over a section
// (runtime/power_sampler.hpp), each point a window on the host's clock from its first call to its last
// synchronize. A calibrated rate holds at the clock it was measured at; under the board's power limit the step
// runs the same kernels at another (docs/STEP_POWER.md), so `calibrate --json` keeps each point's clock beside
// its time and the provenance names each section's. The step model does not read them (docs/MODEL.md "What the
// rates assume").
#include <chrono>
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "runtime/power_sampler.hpp"

namespace ulysses::calib {

class PointClocks {
 public:
  // The GPU by its PCI bus id as CUDA gives it (cudaDeviceGetPCIBusId); sampling starts here. Without NVML or a
  // GPU of that id nothing is sampled and why_not() says why.
  explicit PointClocks(const std::string& pci_bus_id, int period_ms = 10);

  // Runs f() as the point `name`. Names are meant to be unique within a section; the samples of every window
  // of one name are pooled.
  template <class F>
  decltype(auto) around(const std::string& name, F&& f) {
    windows_.push_back({name, now_s(), 0});  // opened before f runs (an allocation failure throws here, not later)
    struct Close {  // closes it on return and on a throw alike, without allocating
      PointClocks& pc;
      std::size_t i;
      ~Close() { pc.windows_[i].end_s = pc.now_s(); }
    } close{*this, windows_.size() - 1};
    return f();
  }

  // Stops sampling (once; later calls do nothing). After it, of() answers.
  void stop();
  // The point's samples: nullptr when none fell inside it (no NVML, or a point shorter than the period).
  const runtime::WindowClock* of(const std::string& name) const;
  // Over every point that holds a sample: the median of their clocks, the lowest and highest, and the points
  // counted; "not sampled (why)" when none.
  std::string summary() const;
  const std::string& why_not() const { return why_not_; }

 private:
  double now_s() const;
  std::size_t points() const;  // distinct names
  runtime::PowerSampler sampler_;
  int gpu_ = -1;
  bool stopped_ = false;
  std::string why_not_;
  std::vector<runtime::ClockWindow> windows_;
  std::map<std::string, runtime::WindowClock> clocks_;
};

}  // namespace ulysses::calib
