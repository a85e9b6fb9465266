#pragma once
// What the driver says about the devices: count, name, versions, and free device memory (the
// fixed costs calibrate, capacity and validate records measure against).
#include <cstdint>
#include <string>

namespace ulysses::runtime::cuda {

struct DeviceInfo {
  int count = 0;                  // visible GPUs
  std::string name;               // device 0
  std::string driver, runtime, nccl;  // versions as text, e.g. "13.0", "2.28.3"
  std::int64_t total_bytes = 0;   // cudaMemGetInfo total of device 0
};
// Throws std::runtime_error when no CUDA device is usable.
DeviceInfo device_info();

// cudaMemGetInfo on `device`: free bytes now (creates the context on first use).
std::int64_t device_free_bytes(int device);

// The device's PCI bus id as CUDA gives it (cudaDeviceGetPCIBusId, e.g. "0000:19:00.0"), the key NVML finds it by
// (runtime/power_sampler.hpp); empty when CUDA cannot give it (then nothing of that GPU is sampled or counted).
std::string pci_bus_id(int device);

}  // namespace ulysses::runtime::cuda
