#pragma once
// Microbenchmarks behind `ulysses calibrate --backend cuda` (calib/cuda/calibrate.hpp) that the
// bench module (runtime/cuda/bench.hpp) does not already provide: attention forward/backward time
// of one kernel at one shape (no validation here: the kernels are validated by `ulysses bench`,
// the GPU tests and every `ulysses validate` run), the pack kernel's copy bandwidth, pinned
// host<->device copies, and the block's exchange phases. Single device (device 0 unless given)
// except the exchanges; every time is a median over `iters` after `warmup` (CUDA events). The
// device memory the driver reports: runtime/cuda/device_info.hpp.
#include <cstdint>
#include <array>
#include <string>
#include <vector>

#include "calib/point_clocks.hpp"
#include "runtime/backend.hpp"

namespace ulysses::calib::cuda {

using runtime::BlockShape;

// Loads the attention and pack kernels on `device` (one tiny launch each) so that the memory
// their modules take (lazy loading) is part of the context that is measured after it.
void load_block_kernels(int device);

struct AttnTime {
  double fwd_s = 0, bwd_s = 0;    // medians
  double fwd_flops = 0, bwd_flops = 0;
};
// kernel: "flash" | "reference". B=1, S, H / H_kv heads on this device, head dim D. Before anything is timed, one
// forward's lse is checked finite (std::runtime_error otherwise). idle_s > 0: the GPU left idle that long before
// each call (runtime/cuda/event_timer.hpp time_on_stream_after; bench/ab/kernel_conditions.cpp). With `clocks`, the
// forward's calls (warm-up and timed) run as the point attention_pass_point(point, "fwd"), the backward's as
// attention_pass_point(point, "bwd") (calib/point_clocks.hpp; the set-up and the check outside both).
AttnTime attention_time(const std::string& kernel, std::int64_t S, std::int64_t H, std::int64_t H_kv, std::int64_t D,
                        bool causal, int warmup, int iters, int device = 0, double idle_s = 0,
                        PointClocks* clocks = nullptr, const std::string& point = {});
// The name of one pass's window of an attention point (pass: "fwd" or "bwd").
std::string attention_pass_point(const std::string& point, const char* pass);

// pack_seq_to_head of a [1, S_l, H, D] bf16 tensor of `bytes` into P = 2 chunks; returns the copy
// bandwidth as the time model counts it: 2 * bytes (read + write) / t, GB/s.
double pack_GBps(std::int64_t bytes, int warmup, int iters, int device = 0);

struct HostLink {
  double h2d_GBps = 0, d2h_GBps = 0;
};
// cudaMemcpyAsync between pinned host memory and the device, `bytes` each way.
HostLink host_link(std::int64_t bytes, int warmup, int iters, int device = 0);

// The block's four exchange phases (BlockPhase 0, 2, 3, 5: a2a.qkv.fwd, a2a.out.fwd, a2a.out.bwd,
// a2a.qkv.bwd) of shape s on its P GPUs, back to back after a barrier, attention skipped (so no
// rank waits for another's compute): per rank, the median over iters of each phase (seconds;
// the attention entries stay 0). *transport (if given): the exchange transport used ("p2p" or "nccl").
std::vector<std::array<double, 6>> exchange_phase_times(const BlockShape& s, int warmup, int iters, double timeout_s,
                                                        std::string* transport = nullptr);

// One exchange phase (a2a.out.bwd, one tensor) of shape s right after every SM spun for T ms
// with no NVLink traffic, for each T in idle_ms: per T the median over iters of the max over
// ranks (seconds). The ranks are aligned by a barrier after the spin, as in the block runs, so
// the difference to T = 0 is what a quiet link costs the next exchange (docs/VALIDATION.md).
std::vector<double> exchange_after_idle(const BlockShape& s, const std::vector<double>& idle_ms, int warmup, int iters,
                                        double timeout_s);

}  // namespace ulysses::calib::cuda
