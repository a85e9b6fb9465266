// rmsnorm_bwd variants (ring depth S, units per thread V, 16- or 4-byte accesses) timed alone at the
// bench layer shapes, next to the whole call: a lab for kernels/layer_ops.cu, whose file it includes.
// Build: `cmake --build build-cuda --target rmsnorm_bwd_sweep` (bench/rmsnorm_bwd_sweep there; static
// cudart: stage it as is); run on one GPU, no arguments. Inputs are constants (timing only).
#include "kernels/layer_ops.cu"
#include <cstdio>
#include <vector>
#include <algorithm>
using namespace ulysses::kernels;
namespace ulysses::kernels { namespace {
template <int N, int V, int S>
float time_variant(std::int64_t T, std::int64_t h, const __nv_bfloat16* d, const __nv_bfloat16* x, const __nv_bfloat16* w,
                   const float* r, __nv_bfloat16* dx, float* part, int* grid_out) {
  const BwdConfig c = config_of<N, V, S>(h);
  int res = 0;
  if (resident_blocks(c, &res) != cudaSuccess) return -1;
  const int grid = int(std::min<std::int64_t>(T, res));
  *grid_out = grid;
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  std::vector<float> t;
  for (int i = 0; i < 13; ++i) {
    cudaEventRecord(a);
    c.launch(grid, c.threads, c.smem, d, x, w, r, dx, part, T, h, nullptr);
    cudaEventRecord(b); cudaEventSynchronize(b);
    float ms; cudaEventElapsedTime(&ms, a, b); if (i >= 3) t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  if (cudaGetLastError() != cudaSuccess) return -2;
  return t[t.size() / 2];
}
}}
int main() {
  for (auto [T, h] : {std::pair<std::int64_t, std::int64_t>{32768, 4096}, {65536, 2560}, {131072, 4096}}) {
    __nv_bfloat16 *d, *x, *w, *dx; float *r, *part, *dw;
    cudaMalloc(&d, T * h * 2); cudaMalloc(&x, T * h * 2); cudaMalloc(&dx, T * h * 2); cudaMalloc(&w, h * 2);
    cudaMalloc(&r, T * 4); cudaMalloc(&part, 4096 * h * 4); cudaMalloc(&dw, h * 4);
    cudaMemset(d, 0x3f, T * h * 2); cudaMemset(x, 0x3f, T * h * 2); cudaMemset(w, 0x3f, h * 2); cudaMemset(r, 0x3f, T * 4);
    const double bytes = 6.0 * T * h;
    int g = 0;
#define V_(N, V, S) { float ms = time_variant<N, V, S>(T, h, d, x, w, r, dx, part, &g); \
    printf("T=%ld h=%ld rows<%d,%d,%d> grid %d: %.1f us %.0f GB/s\n", (long)T, (long)h, N, V, S, g, ms * 1e3, bytes / (ms * 1e-3) * 1e-9); }
    V_(8, 2, 4) V_(8, 2, 2) V_(8, 2, 3) V_(8, 2, 6) V_(8, 1, 4) V_(8, 1, 3) V_(8, 4, 2) V_(8, 4, 3) V_(2, 8, 4)
    // the whole API call (rows + dw reduction)
    std::vector<float> t;
    void* ws; cudaMalloc(&ws, rmsnorm_bwd_workspace_bytes(T, h));
    cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
    for (int i = 0; i < 13; ++i) {
      cudaEventRecord(a);
      if (rmsnorm_bwd(d, x, w, r, dx, dw, ws, T, h, nullptr) != cudaSuccess) printf("launch failed\n");
      cudaEventRecord(b); cudaEventSynchronize(b);
      float ms; cudaEventElapsedTime(&ms, a, b); if (i >= 3) t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    printf("T=%ld h=%ld rmsnorm_bwd (API, workspace %zu B): %.1f us %.0f GB/s\n", (long)T, (long)h, rmsnorm_bwd_workspace_bytes(T, h),
           t[5] * 1e3, bytes / (t[5] * 1e-3) * 1e-9);
    cudaFree(d); cudaFree(x); cudaFree(dx); cudaFree(w); cudaFree(r); cudaFree(part); cudaFree(dw); cudaFree(ws);
  }
  printf("%s\n", cudaGetErrorString(cudaGetLastError()));
}
