// cuBLASLt projections (runtime/cuda/gemm.hpp): each row-major product as its column-major transpose,
// one heuristic-chosen algorithm per call.
#include "runtime/cuda/gemm.hpp"

#include <stdexcept>
#include <string>

namespace ulysses::runtime::cuda {
namespace {

void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(std::string("cuBLASLt: ") + what + " failed (status " + std::to_string(int(s)) + ")");
}
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("CUDA: ") + what + ": " + cudaGetErrorString(e));
}

// RAII for the per-call descriptors
struct Layout {
  cublasLtMatrixLayout_t d = nullptr;
  Layout(std::int64_t rows, std::int64_t cols, std::int64_t ld) {
    check(cublasLtMatrixLayoutCreate(&d, CUDA_R_16BF, static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(cols), ld),
          "cublasLtMatrixLayoutCreate");
  }
  ~Layout() { cublasLtMatrixLayoutDestroy(d); }
};
struct Op {
  cublasLtMatmulDesc_t d = nullptr;
  Op(bool ta, bool tb) {
    check(cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    const cublasOperation_t a = ta ? CUBLAS_OP_T : CUBLAS_OP_N, b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    check(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &a, sizeof(a)), "set TRANSA");
    check(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSB, &b, sizeof(b)), "set TRANSB");
  }
  ~Op() { cublasLtMatmulDescDestroy(d); }
};

}  // namespace

Gemm::Gemm() {
  check(cublasLtCreate(&handle_), "cublasLtCreate");
  check(cudaMalloc(&workspace_, kWorkspaceBytes), "cudaMalloc(cuBLASLt workspace)");
}

Gemm::~Gemm() {
  if (workspace_) cudaFree(workspace_);
  if (handle_) cublasLtDestroy(handle_);
}

void Gemm::matmul(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, const __nv_bfloat16* A,
                  std::int64_t lda, const __nv_bfloat16* B, std::int64_t ldb, __nv_bfloat16* C, std::int64_t ldc,
                  float beta, cudaStream_t stream) {
  if (m < 1 || n < 1 || k < 1) throw std::runtime_error("cuBLASLt: empty GEMM");
  Op op(trans_a, trans_b);
  // stored shapes (column-major rows x cols) before op
  Layout a(trans_a ? k : m, trans_a ? m : k, lda), b(trans_b ? n : k, trans_b ? k : n, ldb), c(m, n, ldc);
  cublasLtMatmulPreference_t pref = nullptr;
  check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  const std::size_t ws = kWorkspaceBytes;
  check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
        "set MAX_WORKSPACE_BYTES");
  cublasLtMatmulHeuristicResult_t heur{};
  int found = 0;
  const cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(handle_, op.d, a.d, b.d, c.d, c.d, pref, 1, &heur, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  check(hs, "cublasLtMatmulAlgoGetHeuristic");
  if (found < 1) throw std::runtime_error("cuBLASLt: no algorithm for this GEMM");
  const float alpha = 1.f;
  check(cublasLtMatmul(handle_, op.d, &alpha, A, a.d, B, b.d, &beta, C, c.d, C, c.d, &heur.algo, workspace_, ws, stream),
        "cublasLtMatmul");
}

// Y^T [N, M] (col-major) = W^T_c^T · X^T_c: W row-major [N, K] is col-major [K, N] (transposed by
// op), X row-major [M, K] is col-major [K, M].
void Gemm::forward(const __nv_bfloat16* X, const __nv_bfloat16* W, __nv_bfloat16* Y, std::int64_t M, std::int64_t N,
                   std::int64_t K, cudaStream_t stream) {
  matmul(true, false, N, M, K, W, K, X, K, Y, N, 0.f, stream);
}

// dX^T [K, M] = W_c [K, N] · dY_c [N, M]
void Gemm::input_grad(const __nv_bfloat16* dY, const __nv_bfloat16* W, __nv_bfloat16* dX, std::int64_t M,
                      std::int64_t N, std::int64_t K, cudaStream_t stream) {
  matmul(false, false, K, M, N, W, K, dY, N, dX, K, 0.f, stream);
}

// dW^T [K, N] = X_c [K, M] · (dY_c [N, M])^T
void Gemm::weight_grad(const __nv_bfloat16* dY, const __nv_bfloat16* X, __nv_bfloat16* dW, std::int64_t M,
                       std::int64_t N, std::int64_t K, float beta, cudaStream_t stream) {
  matmul(false, true, K, N, M, X, K, dY, N, dW, K, beta, stream);
}

}  // namespace ulysses::runtime::cuda
