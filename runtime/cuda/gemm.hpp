#pragma once
// The decoder layer's projections on cuBLASLt (issue 13's whole step): bf16 operands, fp32
// accumulation, bf16 result, row-major tensors as PyTorch holds them. For nn.Linear's weight
// W [N, K] (out_features x in_features) and an input X [M, K] (M tokens):
//   forward       Y  [M, N] = X · W^T
//   input grad    dX [M, K] = dY · W
//   weight grad   dW [N, K] = dY^T · X      (beta = 1 accumulates into dW)
// cuBLAS is column-major: a row-major [R, C] matrix is its column-major transpose, so each of these
// is one cublasLtMatmul on the transposed problem (gemm.cpp says which).
#include <cstdint>

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace ulysses::runtime::cuda {

class Gemm {
 public:
  // One cuBLASLt handle and its workspace (cuBLAS's recommendation for Hopper: 32 MiB) on the current
  // device. Throws std::runtime_error naming the cuBLAS or CUDA call that failed.
  Gemm();
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  void forward(const __nv_bfloat16* X, const __nv_bfloat16* W, __nv_bfloat16* Y, std::int64_t M, std::int64_t N,
               std::int64_t K, cudaStream_t stream);
  void input_grad(const __nv_bfloat16* dY, const __nv_bfloat16* W, __nv_bfloat16* dX, std::int64_t M,
                  std::int64_t N, std::int64_t K, cudaStream_t stream);
  void weight_grad(const __nv_bfloat16* dY, const __nv_bfloat16* X, __nv_bfloat16* dW, std::int64_t M,
                   std::int64_t N, std::int64_t K, float beta, cudaStream_t stream);

  static constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;

 private:
  // column-major C[m, n] = op(A) op(B) (+ beta C): A is [m, k] after op, B [k, n] after op
  void matmul(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, const __nv_bfloat16* A,
              std::int64_t lda, const __nv_bfloat16* B, std::int64_t ldb, __nv_bfloat16* C, std::int64_t ldc,
              float beta, cudaStream_t stream);
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
};

}  // namespace ulysses::runtime::cuda
