#pragma once
// The decoder layer's projections on cuBLASLt (issue 13's whole step): bf16 operands, fp32
// accumulation, bf16 result, row-major tensors as PyTorch holds them. For nn.Linear's weight
// W [N, K] (out_features x in_features) and an input X [M, K] (M tokens):
//   forward       Y  [M, N] = X · W^T
//   input grad    dX [M, K] = dY · W
//   weight grad   dW [N, K] = dY^T · X      (beta = 1 accumulates into dW)
// cuBLAS is column-major: a row-major [R, C] matrix is its column-major transpose, so each of these
// is one cublasLtMatmul on the transposed problem (gemm.cpp says which).
//
// One algorithm per problem (transposes, m, n, k, leading dimensions, beta != 0), chosen on the
// problem's first call: cuBLASLt's heuristic proposes up to kCandidates, each runs once to warm up and
// kTimedRuns times on the call's stream (CUDA events); the lowest median wins, ties to the heuristic's
// order. That first call waits for the stream. With beta != 0 (timing runs would change C, and saving
// it would take a C-sized buffer outside the caller's arena, e.g. the lm_head's gradient of 1 GB in the
// step: the arena's peak would understate the device's), or when the stream is capturing a graph, the
// heuristic's first proposal is kept untimed, unless the caller timed that problem beforehand with
// tune_accumulating_weight_grad while dW held nothing it needs. Later calls of the
// problem reuse the kept algorithm and descriptors. The choice follows measured times, so two
// processes may keep different algorithms (sums in a different order); one Gemm gives the same bits
// for the same inputs every call. Not thread-safe.
//
// Sustained timing (an experiment, docs/STEP_POWER.md): the runs above are short and
// run near the boost clock, while the whole step holds the board at its power limit, where a proposal
// that draws less power per FLOP keeps a higher clock. With a window w > 0 (`ulysses` reads
// ULYSSES_GEMM_TUNE_WINDOW_MS), for a problem whose fastest proposal's burst median is 1 ms or more, each
// proposal then also runs back to back for about w untimed (the board settles at the clock this proposal allows), then for
// about w timed between two events; the lowest mean per call wins. ULYSSES_GEMM_TUNE_LOG=1 prints each
// such problem's proposals (burst median and sustained mean) and both choices to stderr. Measured on one H100 at
// llama-3.1-8b 64K tiled logits (2026-12-07): the step's time and energy the same as with the burst timing.
#include <algorithm>
#include <compare>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace ulysses::runtime::cuda {

// The shard sizes after the first, each once: the accumulating weight-gradient problems of a sharded pass (TiledMLP,
// the tiled loss), to be chosen with Gemm::tune_accumulating_weight_grad before its first shard.
inline std::vector<std::int64_t> accumulating_shard_sizes(const std::vector<std::int64_t>& shards) {
  std::vector<std::int64_t> out;
  for (std::size_t i = 1; i < shards.size(); ++i)
    if (std::find(out.begin(), out.end(), shards[i]) == out.end()) out.push_back(shards[i]);
  return out;
}

class Gemm {
 public:
  // One cuBLASLt handle and its workspace (cuBLAS's recommendation for Hopper: 32 MiB) on the current
  // device. Throws std::runtime_error naming the cuBLAS or CUDA call that failed.
  // tune = false: the heuristic's first proposal, untimed (what every call did before the cache);
  // sustained_window_s > 0: sustained timing (above) for problems of 1 ms or more
  explicit Gemm(bool tune = true, double sustained_window_s = 0);
  // ULYSSES_GEMM_TUNE_WINDOW_MS in seconds (0 when unset; InputError unless a number in 0..10000)
  static double sustained_window_from_env();
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  void forward(const __nv_bfloat16* X, const __nv_bfloat16* W, __nv_bfloat16* Y, std::int64_t M, std::int64_t N,
               std::int64_t K, cudaStream_t stream);
  void input_grad(const __nv_bfloat16* dY, const __nv_bfloat16* W, __nv_bfloat16* dX, std::int64_t M,
                  std::int64_t N, std::int64_t K, cudaStream_t stream);
  void weight_grad(const __nv_bfloat16* dY, const __nv_bfloat16* X, __nv_bfloat16* dW, std::int64_t M,
                   std::int64_t N, std::int64_t K, float beta, cudaStream_t stream);
  // Chooses the accumulating weight gradient's algorithm (beta = 1) for this problem by timing, as a first call
  // times every other problem, so the shards after a first one (TiledMLP's, the tiled loss's) run the fastest
  // proposal instead of the heuristic's first. The timing runs add into dW: call it only where dW's content
  // is about to be overwritten (just before a first shard's beta = 0 weight_grad). dY and X are read only.
  // A problem already chosen (timed or not) is left as it is; untimed Gemm (tune = false): nothing is timed.
  void tune_accumulating_weight_grad(const __nv_bfloat16* dY, const __nv_bfloat16* X, __nv_bfloat16* dW,
                                     std::int64_t M, std::int64_t N, std::int64_t K, cudaStream_t stream);

  static constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;
  static constexpr int kCandidates = 24, kTimedRuns = 3;
  static constexpr double kSustainedMinRunS = 1e-3;  // shorter problems keep the burst timing

  // what the choice of the last call's problem measured: each candidate's median (seconds, in the
  // heuristic's order; empty when untimed; +inf when it failed to run; sustained: the mean per call over the
  // timed window) and the kept index
  struct Tuning {
    std::vector<double> median_s;
    int chosen = 0;
    bool sustained = false;
  };
  const Tuning& last_tuning() const { return *last_; }
  std::size_t problems() const { return plans_.size(); }

 private:
  struct Key {
    bool trans_a, trans_b;
    std::int64_t m, n, k, lda, ldb, ldc;
    bool accumulate;  // beta != 0
    auto operator<=>(const Key&) const = default;
  };
  struct Plan;  // descriptors, the kept algorithm, its Tuning (gemm.cpp)
  // c_free: C's content may be changed by the timing runs (an accumulating problem is timed only then)
  Plan& plan_for(const Key& key, const __nv_bfloat16* A, const __nv_bfloat16* B, __nv_bfloat16* C, float beta,
                 cudaStream_t stream, bool c_free = false);

  // column-major C[m, n] = op(A) op(B) (+ beta C): A is [m, k] after op, B [k, n] after op
  // choose_only: plan_for with C free (c_free), nothing computed
  void matmul(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, const __nv_bfloat16* A,
              std::int64_t lda, const __nv_bfloat16* B, std::int64_t ldb, __nv_bfloat16* C, std::int64_t ldc,
              float beta, cudaStream_t stream, bool choose_only = false);
  void wgrad(const __nv_bfloat16* dY, const __nv_bfloat16* X, __nv_bfloat16* dW, std::int64_t M, std::int64_t N,
             std::int64_t K, float beta, cudaStream_t stream, bool choose_only);
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  bool tune_ = true;
  double window_s_ = 0;
  bool log_ = false;
  std::map<Key, std::unique_ptr<Plan>> plans_;
  Tuning none_;
  const Tuning* last_ = &none_;
};

}  // namespace ulysses::runtime::cuda
