#pragma once
// Microbenchmarks of the CPU backend's building blocks, for `ulysses calibrate --backend cpu`
// (calib/cpu/calibrate.hpp).
// Every time is the median over `iters` of the max over the participating threads, each
// iteration started together after a barrier (as the phases of run_block are).
#include <cstdint>

#include "runtime/reference_attention.hpp"

namespace ulysses::calib::cpu {

using runtime::AttnDims;

// One all-to-all of bytes_per_rank (P equal chunks of bytes_per_rank / P) among P threads.
double alltoall_time_s(int P, std::int64_t bytes_per_rank, int iters);

// One seq->head exchange as a2a.qkv.fwd runs it, B = 1: the producer has just written x_seq
// (untimed), the send and x_head buffers are freshly allocated and poisoned (untimed), then pack
// + all-to-all straight into x_head are timed. bytes_per_rank: the tensor's bytes on one rank.
double exchange_time_s(int P, std::int64_t bytes_per_rank, int iters);

// pack_seq_to_head of a bf16 tensor of `bytes` per thread, on `threads` threads at once.
// Returns the copy bandwidth per thread as the time model counts it: 2 * bytes (read + write) / t.
double pack_GBps(std::int64_t bytes, int threads, int iters);

// Local attention of shape `a` (per thread: its heads over the full sequence) on `threads`
// threads at once, each on its own bf16-valued data, the way attn.fwd / attn.bwd run in the
// backend (widen to fp32, attention, round to bf16).
struct AttnTimes {
  double fwd_s = 0, bwd_s = 0;
};
AttnTimes attention_time_s(const AttnDims& a, int threads, int iters);

}  // namespace ulysses::calib::cpu
