#pragma once
// One error header for the CUDA backend: each macro throws std::runtime_error carrying the
// call text, file:line and the library's error string.
#include <stdexcept>
#include <string>

#include <cuda_runtime.h>
#include <cupti.h>
#include <nccl.h>

namespace ulysses::runtime::cuda {

[[noreturn]] inline void throw_call_error(const char* lib, const char* call, const char* file, int line, const std::string& what) {
  throw std::runtime_error(std::string(lib) + " error: " + what + " in " + call + " (" + file + ":" + std::to_string(line) + ")");
}

}  // namespace ulysses::runtime::cuda

#define CUDA_CHECK(call)                                                                                   \
  do {                                                                                                     \
    const cudaError_t e_ = (call);                                                                         \
    if (e_ != cudaSuccess) ::ulysses::runtime::cuda::throw_call_error("CUDA", #call, __FILE__, __LINE__, cudaGetErrorString(e_)); \
  } while (0)

// ncclInProgress is not an error on a non-blocking communicator: callers poll it (comm.hpp).
#define NCCL_CHECK(call)                                                                                   \
  do {                                                                                                     \
    const ncclResult_t r_ = (call);                                                                        \
    if (r_ != ncclSuccess && r_ != ncclInProgress)                                                         \
      ::ulysses::runtime::cuda::throw_call_error("NCCL", #call, __FILE__, __LINE__, ncclGetErrorString(r_)); \
  } while (0)

#define CUPTI_CHECK(call)                                                                                  \
  do {                                                                                                     \
    const CUptiResult c_ = (call);                                                                         \
    if (c_ != CUPTI_SUCCESS) {                                                                             \
      const char* s_ = nullptr;                                                                            \
      cuptiGetResultString(c_, &s_);                                                                       \
      ::ulysses::runtime::cuda::throw_call_error("CUPTI", #call, __FILE__, __LINE__, s_ ? s_ : "unknown"); \
    }                                                                                                      \
  } while (0)
