// calib/point_clocks.hpp: one sampler over a section, its samples matched to the points' windows once stopped.
#include "calib/point_clocks.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "core/stats.hpp"

namespace ulysses::calib {

PointClocks::PointClocks(const std::string& pci_bus_id, int period_ms) : sampler_(period_ms) {
  gpu_ = pci_bus_id.empty() ? -1 : sampler_.index_of(pci_bus_id);
  if (gpu_ < 0) {
    const std::string why = sampler_.unavailable();  // no NVML: its reason; NVML without that GPU: ours
    why_not_ = !why.empty()              ? why
               : pci_bus_id.empty() ? std::string("CUDA gave no PCI bus id for the device")
                                    : fmt::format("NVML has no GPU of PCI bus id '{}'", pci_bus_id);
    stopped_ = true;
    return;
  }
  sampler_.start();
}

double PointClocks::now_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - sampler_.started_at()).count();
}

void PointClocks::stop() {
  if (stopped_) return;
  stopped_ = true;
  (void)sampler_.stop();
  clocks_ = runtime::clock_in_windows(sampler_.samples(), gpu_, windows_);
  if (clocks_.empty()) why_not_ = fmt::format("no sample inside any of the {} points", points());
}

std::size_t PointClocks::points() const {
  std::set<std::string> names;
  for (const runtime::ClockWindow& w : windows_) names.insert(w.name);
  return names.size();
}

const runtime::WindowClock* PointClocks::of(const std::string& name) const {
  const auto it = clocks_.find(name);
  return it == clocks_.end() ? nullptr : &it->second;
}

std::string PointClocks::summary() const {
  if (clocks_.empty()) return fmt::format("not sampled ({})", why_not_.empty() ? "not stopped yet" : why_not_);
  std::vector<double> mhz;
  for (const auto& [name, c] : clocks_) mhz.push_back(c.sm_mhz_median);
  const auto [lo, hi] = std::minmax_element(mhz.begin(), mhz.end());
  return fmt::format("median {:.0f} MHz ({:.0f}-{:.0f}) over {} of {} points", core::median(mhz), *lo, *hi, mhz.size(),
                     points());
}

}  // namespace ulysses::calib
