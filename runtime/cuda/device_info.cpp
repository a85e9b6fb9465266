// Device count, name, versions and free memory from the CUDA runtime and NCCL (runtime/cuda/device_info.hpp).
#include "runtime/cuda/device_info.hpp"

#include <stdexcept>
#include <string>

#include <cuda_runtime.h>
#include <nccl.h>

#include "runtime/cuda/cuda_check.hpp"

namespace ulysses::runtime::cuda {
namespace {

std::string version_text(int v, int major_div, int minor_div, int minor_mod) {
  return std::to_string(v / major_div) + "." + std::to_string((v / minor_div) % minor_mod);
}

}  // namespace

DeviceInfo device_info() {
  DeviceInfo d;
  if (const cudaError_t e = cudaGetDeviceCount(&d.count); e != cudaSuccess || d.count == 0)
    throw std::runtime_error(std::string("no usable CUDA device on this machine (cudaGetDeviceCount: ") +
                             (e == cudaSuccess ? "0 devices" : cudaGetErrorString(e)) +
                             "); calibrate --backend cuda needs a GPU - use --backend cpu, or --from-raw to re-derive stored measurements");
  cudaDeviceProp p{};
  CUDA_CHECK(cudaGetDeviceProperties(&p, 0));
  d.name = p.name;
  int drv = 0, rt = 0, nccl = 0;
  CUDA_CHECK(cudaDriverGetVersion(&drv));
  CUDA_CHECK(cudaRuntimeGetVersion(&rt));
  ncclGetVersion(&nccl);
  d.driver = "CUDA driver API " + version_text(drv, 1000, 10, 100);
  d.runtime = version_text(rt, 1000, 10, 100);
  d.nccl = std::to_string(nccl / 10000) + "." + std::to_string((nccl / 100) % 100) + "." + std::to_string(nccl % 100);
  std::size_t free_b = 0, total_b = 0;
  CUDA_CHECK(cudaSetDevice(0));
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  d.total_bytes = static_cast<std::int64_t>(total_b);
  return d;
}

std::int64_t device_free_bytes(int device) {
  CUDA_CHECK(cudaSetDevice(device));
  std::size_t free_b = 0, total_b = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  return static_cast<std::int64_t>(free_b);
}

std::string pci_bus_id(int device) {
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return {};
  }
  return bus;
}

}  // namespace ulysses::runtime::cuda
