#pragma once
// The CPU reference backend: P ranks as std::threads of one process, the exchange through
// shared memory with the index maps of core/layout.hpp, attention in fp32 accumulation
// (runtime/reference_attention.hpp), tensors stored as bf16 bits (core/bf16.hpp).
// The validating iteration's results are checked by runtime/verify.hpp, as the CUDA backend's.
//
// One iteration on rank r (B batch, S sequence, S_l = S/P, H_l = H/P, H_kv_l = kv heads per rank):
//   a2a.qkv.fwd  q_seq [B,S_l,H,D] -> q_head [B,S,H_l,D]; k, v likewise with H_kv heads (when
//                P > H_kv: replicate -> [B,S_l,P,D] first, or send_once straight from k_seq);
//                q, k and v travel in one grouped exchange (one pair of barriers)
//   attn.fwd     o_head [B,S,H_l,D] bf16, lse [B,H_l,S] fp32
//   a2a.out.fwd  o_head -> o_seq [B,S_l,H,D]
//   a2a.out.bwd  dout_seq -> dout_head
//   attn.bwd     dq_head, dk_head, dv_head (bf16; fp32 accumulation inside)
//   a2a.qkv.bwd  dq_head -> dq_seq; dk, dv -> dk_seq, dv_seq (P > H_kv: the R = P/H_kv replica
//                gradients summed in fp32 in ascending peer order, then rounded once); grouped
// The first iteration validates (checks below), then `warmup` untimed, then `iters` timed.
// Phase time on a rank = the timed segments of that phase, each started after a barrier so the
// ranks enter it together; allocation and NaN poisoning of outputs happen outside the segments.
// Peak memory per rank = the largest sum of live tracked buffers in a timed iteration (inputs,
// outputs, both layouts, exchange send/recv buffers, kv replicas, lse). Not counted: the fp32
// working copies inside attention and the fp32 accumulator of the kv-gradient sum, which stand
// in for the on-chip tiles / registers of a fused GPU kernel.
#include <vector>

#include "runtime/backend.hpp"
#include "runtime/verify.hpp"

namespace ulysses::runtime::cpu {

class CpuBackend : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  // Throws std::invalid_argument when validate(shape) fails.
  Measurement run_block(const BlockShape& shape, const RunOptions& opt) override;
  // The sequence-parallel ZeRO-3 step at tiny shapes, checked against one rank (runtime/cpu/cpu_step.hpp).
  StepMeasurement run_step(const Scenario& sc, const StepRunOptions& opt, const std::string& origin) override;
};

// Host memory a run of `shape` needs before it starts (an estimate, for refusing what cannot fit):
// P ranks' block buffers (block_peak_bytes_freeing, exact for the tracked buffers) plus the
// full-sequence inputs (bf16), the kept results of the validating iteration (bf16) and the fp64
// oracle's tensors: (H + H_kv) * B * S * D * (2 + 2 + 4 * 8) bytes.
std::int64_t memory_estimate_bytes(const BlockShape& shape);
// MemAvailable of /proc/meminfo, or ULYSSES_AVAILABLE_RAM_GiB when set (tests, leaving room);
// -1 when neither can be read.
std::int64_t available_ram_bytes();

// Full-sequence inputs of one run (runtime/verify.hpp), bf16 values from N(0,1) drawn with the seed:
//   q, dout [B,S,H,D]   k, v [B,S,H_kv,D]
BlockInputs make_inputs(const BlockShape& s, std::uint64_t seed);

std::string host_cpu_model();  // "/proc/cpuinfo" model name, or "unknown cpu"

}  // namespace ulysses::runtime::cpu
