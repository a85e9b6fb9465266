#pragma once
// The optimizer on the host (plan.offload_optimizer on our runtime, issue 13): DeepSpeed's offloaded step
// (ZeRO-Offload: the gradients go to the host, DeepSpeedCPUAdam updates fp32 master weights and moments in
// host memory, the bf16 parameters go back) with the rule of runtime/reference_adam.hpp: the global norm,
// DeepSpeed's clipping, AdamW in FusedAdam's order of operations in fp32, the bf16 parameters rounded to
// nearest even from the master. The same arithmetic as kernels/optim_ops.cu, so a step on the host and one
// on the GPU differ only by the norm's summation order.
//
// Work is split over `threads` threads in fixed chunks of every tensor; the norm is summed per chunk in fp64
// and the chunks in index order, so the result does not depend on the thread count or on which thread ran a chunk.
// Shapes, per tensor of n elements: grad [n] bf16 or fp32 (host, read), param [n] bf16 (host, written);
// master, m, v [n] fp32 each, owned here.
#include <cstdint>
#include <functional>
#include <vector>

#include "core/bf16.hpp"
#include "runtime/reference_adam.hpp"

namespace ulysses::runtime {

// grad and param must not overlap, in one tensor or across tensors (the loops read and write through restrict
// pointers, chunks on several threads); step() throws std::invalid_argument when a tensor's own two overlap.
struct HostTensor {
  const void* grad;      // the gradient (host memory)
  bool grad_fp32;        // else bf16
  core::bf16* param;     // the bf16 parameters written after the update (host memory)
  std::int64_t n;
};

// How the work runs (the results are the same bits either way; bench/ab/host_adam_scan.cpp times them).
struct HostAdamOptions {
  bool dynamic_units = true;  // each thread takes the next unit of work (else unit i on thread i % threads)
  bool huge_pages = true;     // the state's memory asked for transparent huge pages (madvise) before first use
};

class HostAdamW {
 public:
  // Master weights from the initial bf16 parameters (`params[i]` n_i values each), moments zero.
  HostAdamW(const std::vector<std::vector<core::bf16>>& params, const AdamConfig& c, int threads, HostAdamOptions o = {});

  // One step t (counts from 1) over every tensor, in the order of the constructor's `params`. With ZeRO's
  // partitions (these tensors one rank's parts of the model's), `global_sum_squares` turns this rank's sum of
  // squared gradients into the sum over every rank (a collective: every rank calls it once per step); the norm,
  // the clipping coefficient and the update then follow from that sum, as on one rank from its own.
  using SumSquares = std::function<double(double mine)>;
  void step(const std::vector<HostTensor>& tensors, const SumSquares& global_sum_squares = {});

  std::int64_t steps() const { return t_; }
  ClipResult last_clip() const { return clip_; }
  const std::vector<float>& master(std::size_t i) const { return master_.at(i); }
  const std::vector<float>& m(std::size_t i) const { return m_.at(i); }
  const std::vector<float>& v(std::size_t i) const { return v_.at(i); }
  std::int64_t params() const;  // all tensors' elements
  std::size_t tensors() const { return master_.size(); }

 private:
  AdamConfig c_;
  int threads_;
  HostAdamOptions o_;
  std::vector<std::vector<float>> master_, m_, v_;
  std::int64_t t_ = 0;
  ClipResult clip_;
};

// The bytes each parameter holds in host memory under this optimizer (master, m, v: fp32).
inline constexpr std::int64_t kHostAdamStateBytesPerParam = 12;

}  // namespace ulysses::runtime
