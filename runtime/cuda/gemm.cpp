// cuBLASLt projections (runtime/cuda/gemm.hpp): each row-major product as its column-major transpose;
// one algorithm per problem, timed among the heuristic's proposals on the problem's first call.
#include "runtime/cuda/gemm.hpp"

#include "runtime/cuda/cuda_events.hpp"
#include "runtime/cuda/env.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <optional>
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

// RAII for the descriptors a Plan keeps
struct Layout {
  cublasLtMatrixLayout_t d = nullptr;
  Layout(std::int64_t rows, std::int64_t cols, std::int64_t ld) {
    check(cublasLtMatrixLayoutCreate(&d, CUDA_R_16BF, static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(cols), ld),
          "cublasLtMatrixLayoutCreate");
  }
  ~Layout() { cublasLtMatrixLayoutDestroy(d); }
  Layout(const Layout&) = delete;
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
  Op(const Op&) = delete;
};

}  // namespace

struct Gemm::Plan {
  Op op;
  Layout a, b, c;  // stored shapes (column-major rows x cols) before op
  cublasLtMatmulAlgo_t algo{};
  Tuning tuning;
  explicit Plan(const Key& key)
      : op(key.trans_a, key.trans_b),
        a(key.trans_a ? key.k : key.m, key.trans_a ? key.m : key.k, key.lda),
        b(key.trans_b ? key.n : key.k, key.trans_b ? key.k : key.n, key.ldb),
        c(key.m, key.n, key.ldc) {}
};

Gemm::Gemm(bool tune, double sustained_window_s) : tune_(tune), window_s_(sustained_window_s) {
  log_ = env_flag("ULYSSES_GEMM_TUNE_LOG");
  check(cublasLtCreate(&handle_), "cublasLtCreate");
  check(cudaMalloc(&workspace_, kWorkspaceBytes), "cudaMalloc(cuBLASLt workspace)");
}

double Gemm::sustained_window_from_env() {
  return env_number("ULYSSES_GEMM_TUNE_WINDOW_MS", 0, 10000, "a number of milliseconds in 0..10000").value_or(0) * 1e-3;
}

Gemm::~Gemm() {
  plans_.clear();
  if (workspace_) cudaFree(workspace_);
  if (handle_) cublasLtDestroy(handle_);
}

Gemm::Plan& Gemm::plan_for(const Key& key, const __nv_bfloat16* A, const __nv_bfloat16* B, __nv_bfloat16* C,
                           float beta, cudaStream_t stream, bool c_free) {
  if (const auto it = plans_.find(key); it != plans_.end()) return *it->second;
  auto plan = std::make_unique<Plan>(key);
  cublasLtMatmulPreference_t pref = nullptr;
  check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  const std::size_t ws = kWorkspaceBytes;
  cublasStatus_t hs = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  cublasLtMatmulHeuristicResult_t heur[kCandidates] = {};
  int found = 0;
  if (hs == CUBLAS_STATUS_SUCCESS)
    hs = cublasLtMatmulAlgoGetHeuristic(handle_, plan->op.d, plan->a.d, plan->b.d, plan->c.d, plan->c.d, pref, kCandidates,
                                        heur, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  check(hs, "cublasLtMatmulAlgoGetHeuristic");
  int proposals = 0;  // the usable ones, in the heuristic's order
  for (int i = 0; i < found; ++i)
    if (heur[i].state == CUBLAS_STATUS_SUCCESS) heur[proposals++] = heur[i];
  if (proposals < 1) throw std::runtime_error("cuBLASLt: no algorithm for this GEMM");
  plan->algo = heur[0].algo;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  check(cudaStreamIsCapturing(stream, &capture), "cudaStreamIsCapturing");
  // an accumulating GEMM (beta != 0) is timed only where C is free: its runs change C (gemm.hpp says why no copy)
  const bool timed = tune_ && proposals > 1 && capture == cudaStreamCaptureStatusNone && (!key.accumulate || c_free);
  if (timed) {
    const Events ev(2);  // start, stop
    const float alpha = 1.f;
    // n runs of proposal i between two events, seconds (nullopt: cuBLASLt refused it)
    auto time_runs = [&](int i, std::int64_t n) -> std::optional<double> {
      check(cudaEventRecord(ev.e[0], stream), "cudaEventRecord");
      for (std::int64_t r = 0; r < n; ++r)
        if (cublasLtMatmul(handle_, plan->op.d, &alpha, A, plan->a.d, B, plan->b.d, &beta, C, plan->c.d, C, plan->c.d,
                           &heur[i].algo, workspace_, ws, stream) != CUBLAS_STATUS_SUCCESS)
          return std::nullopt;
      check(cudaEventRecord(ev.e[1], stream), "cudaEventRecord");
      check(cudaEventSynchronize(ev.e[1]), "cudaEventSynchronize");
      float ms = 0;
      check(cudaEventElapsedTime(&ms, ev.e[0], ev.e[1]), "cudaEventElapsedTime");
      return ms * 1e-3;
    };
    for (int i = 0; i < proposals; ++i) {
      std::vector<double> t;
      for (int run = 0; run <= kTimedRuns; ++run) {  // run 0 warms up
        const auto s = time_runs(i, 1);
        if (!s) break;
        if (run > 0) t.push_back(*s);
      }
      double median = std::numeric_limits<double>::infinity();
      if (t.size() == std::size_t{kTimedRuns}) {
        std::sort(t.begin(), t.end());
        median = t[t.size() / 2];
      }
      plan->tuning.median_s.push_back(median);
    }
    // sustained, for a problem whose fastest proposal takes kSustainedMinRunS or more: each proposal that ran
    // about window_s_ untimed, then about window_s_ timed, back to back
    const std::vector<double> burst = plan->tuning.median_s;
    const auto burst_best = std::min_element(burst.begin(), burst.end());  // the first of equal ones
    const double fastest = *burst_best;
    if (window_s_ > 0 && fastest >= kSustainedMinRunS && fastest < std::numeric_limits<double>::infinity()) {
      plan->tuning.sustained = true;
      for (int i = 0; i < proposals; ++i) {
        double& t = plan->tuning.median_s[static_cast<std::size_t>(i)];
        if (!(t < std::numeric_limits<double>::infinity())) continue;
        const auto n = std::max<std::int64_t>(1, static_cast<std::int64_t>(window_s_ / t));
        const auto heat = time_runs(i, n);
        const auto run = heat ? time_runs(i, n) : std::nullopt;
        t = run ? *run / static_cast<double>(n) : std::numeric_limits<double>::infinity();
      }
    }
    for (int i = 1; i < proposals; ++i)  // ties: the earlier
      if (plan->tuning.median_s[static_cast<std::size_t>(i)] < plan->tuning.median_s[static_cast<std::size_t>(plan->tuning.chosen)])
        plan->tuning.chosen = i;
    if (!(plan->tuning.median_s[plan->tuning.chosen] < std::numeric_limits<double>::infinity()))
      throw std::runtime_error("cuBLASLt: none of the heuristic's algorithms ran");
    plan->algo = heur[plan->tuning.chosen].algo;
    if (log_ && plan->tuning.sustained) {
      std::string line = "gemm tune m " + std::to_string(key.m) + " n " + std::to_string(key.n) + " k " + std::to_string(key.k) +
                         (key.accumulate ? " beta 1" : " beta 0") + ": proposal, burst median us, sustained mean us:";
      for (int i = 0; i < proposals; ++i)
        line += " " + std::to_string(i) + " " + std::to_string(burst[static_cast<std::size_t>(i)] * 1e6) + " " +
                std::to_string(plan->tuning.median_s[static_cast<std::size_t>(i)] * 1e6) + ";";
      std::fprintf(stderr, "%s burst chose %d, sustained %d\n", line.c_str(), static_cast<int>(burst_best - burst.begin()),
                   plan->tuning.chosen);
    }
  }
  return *plans_.emplace(key, std::move(plan)).first->second;
}

void Gemm::matmul(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, const __nv_bfloat16* A,
                  std::int64_t lda, const __nv_bfloat16* B, std::int64_t ldb, __nv_bfloat16* C, std::int64_t ldc,
                  float beta, cudaStream_t stream, bool choose_only) {
  if (m < 1 || n < 1 || k < 1) throw std::runtime_error("cuBLASLt: empty GEMM");
  Plan& p = plan_for(Key{trans_a, trans_b, m, n, k, lda, ldb, ldc, beta != 0.f}, A, B, C, beta, stream, choose_only);
  last_ = &p.tuning;
  if (choose_only) return;
  const float alpha = 1.f;
  check(cublasLtMatmul(handle_, p.op.d, &alpha, A, p.a.d, B, p.b.d, &beta, C, p.c.d, C, p.c.d, &p.algo, workspace_,
                       kWorkspaceBytes, stream),
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

// dW^T [K, N] = X_c [K, M] · (dY_c [N, M])^T; choose_only: the problem's algorithm chosen (dW free for the timing
// runs), nothing computed
void Gemm::wgrad(const __nv_bfloat16* dY, const __nv_bfloat16* X, __nv_bfloat16* dW, std::int64_t M, std::int64_t N,
                 std::int64_t K, float beta, cudaStream_t stream, bool choose_only) {
  matmul(false, true, K, N, M, X, K, dY, N, dW, K, beta, stream, choose_only);
}

void Gemm::weight_grad(const __nv_bfloat16* dY, const __nv_bfloat16* X, __nv_bfloat16* dW, std::int64_t M,
                       std::int64_t N, std::int64_t K, float beta, cudaStream_t stream) {
  wgrad(dY, X, dW, M, N, K, beta, stream, false);
}

void Gemm::tune_accumulating_weight_grad(const __nv_bfloat16* dY, const __nv_bfloat16* X, __nv_bfloat16* dW,
                                         std::int64_t M, std::int64_t N, std::int64_t K, cudaStream_t stream) {
  wgrad(dY, X, dW, M, N, K, 1.f, stream, true);
}

}  // namespace ulysses::runtime::cuda
