#pragma once
// The whole training step under Ulysses sequence parallelism and ZeRO-3 on P ranks, the ranks being
// threads of one process, in fp64: what a P-GPU step computes, rank by rank, with every collective moving
// real data between the ranks. Its results must equal the one-rank step (runtime/reference_step.hpp) and
// the one-rank optimizer (runtime/reference_adam.hpp) to fp64 rounding: issue 13's "the step on P GPUs
// equals the same step on one GPU", testable in CI (tests/runtime/test_sp_step.cpp).
//
// On rank r of P, the sequence of T tokens split into P contiguous shards of T_l = T/P:
//   labels      shifted once over the whole sequence, then split (HF `shift_labels`)
//   zero.allgather   every parameter from its P partitions (DeepSpeed ZeRO-3: a tensor of n elements
//                    padded to P*ceil(n/P), rank r holding elements [r*ceil(n/P), (r+1)*ceil(n/P)))
//   valid tokens     all-reduced before the loss, which each rank divides by the sum (token-weighted)
//   forward/backward the one-rank step on the rank's T_l tokens and their RoPE rows, each layer's
//                    attention the Ulysses exchange (core/layout.hpp maps, B = 1):
//                      q [T_l, H, D] -> [T, H/P, D]; k, v [T_l, H_kv, D] -> [T, max(H_kv/P, 1), D]
//                      (H_kv < P: the chunk for rank c carries kv head c/(P/H_kv), as send_once packs it)
//                      causal attention of the rank's heads over all T positions, o back to [T_l, H, D];
//                      the backward the inverse maps, kv gradients of a replicated head summed over its
//                      P/H_kv receivers in ascending rank order
//   zero.reduce_scatter   each gradient summed over ranks (ascending), rank r keeping its partition
//   optimizer        the global gradient norm all-reduced from the partitions' squares, DeepSpeed's
//                    clipping coefficient, AdamW on the rank's fp32 (here fp64) master partition
//   after the step   the bf16 parameters all-gathered from the updated partitions
// dp = 1: ZeRO-3 shards over the P sequence-parallel ranks (ALST's single-replica plan).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/reference_adam.hpp"
#include "runtime/reference_step.hpp"

namespace ulysses::runtime::cpu {

struct SpStepInput {
  StepDims dims;                         // dims.layer.T: the whole sequence (a multiple of P)
  StepParams params;                     // bf16 parameters (the one-rank view)
  std::vector<std::int64_t> tokens;      // [T]
  std::vector<core::bf16> cos, sin;      // [T, D/2] RoPE tables of positions 0..T-1
  std::int64_t logits_shards = 1;        // tiled logits: torch.chunk shards of each rank's T_l tokens
  AdamConfig adam;
};

// Where a rank's partition of an n-element tensor lies (DeepSpeed ZeRO-3's padded equal partitions).
struct Partition {
  std::int64_t size = 0;                 // ceil(n / P): every rank's partition, padding included
  std::int64_t begin(int rank) const { return rank * size; }
};
Partition zero_partition(std::int64_t n, int P);

struct SpStepResult {
  int ranks = 1;
  double loss = 0;                       // sum over ranks of the loss sums / all valid tokens
  std::int64_t valid_tokens = 0;         // over ranks
  std::vector<std::int64_t> valid_tokens_per_rank;
  StepResult grads;                      // the reduce-scattered gradients, assembled from the partitions
  ClipResult clip;                       // the global norm and the clipping coefficient
  StepParams updated;                    // the bf16 parameters after the step, all-gathered
  std::vector<std::vector<double>> masters;  // the updated fp64 masters, assembled, in param_tensors order (runtime/reference_step.hpp)
  std::int64_t a2a_elems_per_rank = 0;   // elements a rank sent through all-to-alls (its own chunk excluded)
  std::int64_t gathered_elems_per_rank = 0;  // elements a rank received through all-gathers
  // per rank, in order: (phase, seconds) of zero.allgather (the parameters), fwd_bwd (forward and backward
  // with the exchanges), zero.reduce_scatter, optimizer.step (norm, clipping, AdamW, the all-gather after it)
  std::vector<std::vector<std::pair<std::string, double>>> phase_s;
};

// One step of the P ranks; throws std::invalid_argument when T % P, H % P, or the kv heads rule
// (H_kv divides or is a multiple of P) fails, and rethrows a rank's failure (the others are released).
SpStepResult sp_step(const SpStepInput& in, int P);

}  // namespace ulysses::runtime::cpu
