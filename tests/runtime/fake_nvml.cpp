// A stand-in for libnvidia-ml.so.1 (runtime/power_sampler.hpp opens it through ULYSSES_NVML_LIB): two GPUs, the
// first at 1400 MHz drawing 690 W of a 700 W limit, the second idle at 1980 MHz and 70 W; the first is found by its
// PCI bus id 0000:19:00.0 (domain of 4 or 8 digits) and its energy counter (millijoules) grows by 250 J per read;
// NVML's return codes (0 success, 2 invalid argument, 6 not found) and units (MHz, milliwatts, millijoules).
#include <cstdint>
#include <cstring>

namespace {
unsigned long long energy_mj = 5000000;
}

extern "C" {
int nvmlInit_v2() { return 0; }
int nvmlShutdown() { return 0; }
int nvmlDeviceGetCount_v2(unsigned* n) {
  *n = 2;
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void** dev) {
  if (i >= 2) return 2;
  *dev = reinterpret_cast<void*>(std::uintptr_t{i} + 1);
  return 0;
}
int nvmlDeviceGetEnforcedPowerLimit(void*, unsigned* mw) {
  *mw = 700000;
  return 0;
}
int nvmlDeviceGetClockInfo(void* dev, int type, unsigned* mhz) {
  if (type != 1) return 2;  // NVML_CLOCK_SM only
  *mhz = dev == reinterpret_cast<void*>(1) ? 1400 : 1980;
  return 0;
}
int nvmlDeviceGetHandleByPciBusId_v2(const char* bus, void** dev) {
  if (std::strcmp(bus, "0000:19:00.0") != 0 && std::strcmp(bus, "00000000:19:00.0") != 0) return 6;
  *dev = reinterpret_cast<void*>(1);
  return 0;
}
int nvmlDeviceGetTotalEnergyConsumption(void* dev, unsigned long long* mj) {
  if (dev != reinterpret_cast<void*>(1)) return 2;
  *mj = energy_mj;
  energy_mj += 250000;
  return 0;
}
int nvmlDeviceGetPowerUsage(void* dev, unsigned* mw) {
  *mw = dev == reinterpret_cast<void*>(1) ? 690000 : 70000;
  return 0;
}
}
