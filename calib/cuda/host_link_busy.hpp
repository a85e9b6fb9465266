#pragma once
// The host link while the GPU computes (issue 13's calibration list): our runtime's checkpoint offload copies a
// layer's input to pinned host memory, and back, on a copy stream while the compute stream runs the layers, so the
// step model's overlap terms (sim/timing.cpp, offload.ckpt.*) want the link's rate under that load, not idle.
// Measured with our cuBLASLt GEMMs ([16384, 4096] x [4096, 4096]^T, bf16) back to back on one stream, each copy
// on another, started once the first GEMM has run and ended before the last: each direction alone, then both at
// once (each on its own stream). A copy the GEMMs did not cover (they ended first) is not counted.
#include <cstdint>
#include <string>

namespace ulysses::calib::cuda {

struct HostLinkBusy {
  double h2d_GBps = 0, d2h_GBps = 0;            // one direction at a time, the GEMMs running
  double both_h2d_GBps = 0, both_d2h_GBps = 0;  // both directions at once, the GEMMs running
  double idle_h2d_GBps = 0, idle_d2h_GBps = 0;  // the same copies alone, in the same call
  double gemm_tflops = 0;                       // one GEMM alone
  int gemms = 0;                                // GEMMs around each copy
  int covered = 0, timed = 0;                   // timed copies the GEMMs covered (the medians are of those), of all
  bool ok = false;  // every copy covered at least once (after one retry with twice the GEMMs); else the rates are 0
};

// `bytes` per copy (pinned host memory), median of `iters` after `warmup`; throws std::runtime_error naming a CUDA
// call that failed. A copy the GEMMs never covered is a measurement condition, not an error: ok says so.
HostLinkBusy host_link_busy(std::int64_t bytes, int warmup, int iters, int device = 0);

}  // namespace ulysses::calib::cuda
