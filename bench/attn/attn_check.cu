// Correctness check and benchmark of the flash attention kernels (kernels/attention_flash.hpp).
//
//   attn_check check [--dump DIR] [--all-variants]
//                                   fp64 CPU reference (runtime/reference_attention.hpp) on fresh random inputs, outputs poisoned
//                                   (NaN) before each run; one JSON line per case with the max
//                                   abs error of o, lse, dq, dk, dv. --dump writes each case's
//                                   inputs (q, k, v, dout as raw bf16) for bench/peers/attn_peer.py.
//   attn_check bench [--quick | --one S H HKV D CAUSAL]
//                                   TFLOP/s sweep (S, H, H_kv, D, causal), one JSON line a point.
// Exit code: 0 ok, 1 a CUDA error, 2 bad arguments.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/attention_flash.hpp"
#include "bench/attn/attn_tuning.hpp"
#include "runtime/reference_attention.hpp"

namespace {

using Shape = ulysses::runtime::AttnDims;  // B, S, H, H_kv, D, causal
namespace K = ulysses::kernels;
namespace R = ulysses::runtime;
namespace T = ulysses::bench::attn;

std::int64_t q_elems(const Shape& s) { return s.B * s.S * s.H * s.D; }
std::int64_t kv_elems(const Shape& s) { return s.B * s.S * s.H_kv * s.D; }
float scale(const Shape& s) { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.D))); }

#define CHECK_CUDA(x)                                                                             \
  do {                                                                                            \
    cudaError_t e_ = (x);                                                                         \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorName(e_), __FILE__, __LINE__, \
                   cudaGetErrorString(e_));                                                       \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

struct DeviceBuffers {
  __nv_bfloat16 *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr, *dout = nullptr;
  __nv_bfloat16 *dq = nullptr, *dk = nullptr, *dv = nullptr;
  float* lse = nullptr;
  void* ws = nullptr;
  std::size_t qb = 0, kvb = 0, lseb = 0, wsb = 0;

  explicit DeviceBuffers(const Shape& s) {
    qb = static_cast<std::size_t>(q_elems(s)) * 2;
    kvb = static_cast<std::size_t>(kv_elems(s)) * 2;
    lseb = static_cast<std::size_t>(s.B * s.H * s.S) * 4;
    wsb = K::attn_bwd_flash_workspace_bytes(s.B, s.S, s.H, s.H_kv, s.D);
    for (auto* p : {&q, &o, &dout, &dq}) CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(p), qb));
    for (auto* p : {&k, &v, &dk, &dv}) CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(p), kvb));
    CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&lse), lseb));
    CHECK_CUDA(cudaMalloc(&ws, wsb));
  }
  ~DeviceBuffers() {
    for (void* p : {static_cast<void*>(q), static_cast<void*>(k), static_cast<void*>(v), static_cast<void*>(o),
                    static_cast<void*>(dout), static_cast<void*>(dq), static_cast<void*>(dk),
                    static_cast<void*>(dv), static_cast<void*>(lse), ws})
      cudaFree(p);
  }
  void poison_outputs() {  // all-ones bytes: NaN in bf16 and fp32; the workspace too
    for (void* p : {static_cast<void*>(o), static_cast<void*>(dq)}) CHECK_CUDA(cudaMemset(p, 0xFF, qb));
    for (void* p : {static_cast<void*>(dk), static_cast<void*>(dv)}) CHECK_CUDA(cudaMemset(p, 0xFF, kvb));
    CHECK_CUDA(cudaMemset(lse, 0xFF, lseb));
    CHECK_CUDA(cudaMemset(ws, 0xFF, wsb));
  }
  K::AttnFwdParams fwd(const Shape& s) const {
    K::AttnFwdParams p;
    p.q = q, p.k = k, p.v = v, p.o = o, p.lse = lse;
    p.B = s.B, p.S = s.S, p.H = s.H, p.H_kv = s.H_kv, p.D = s.D, p.causal = s.causal;
    p.scale = scale(s);
    return p;
  }
  K::AttnBwdParams bwd(const Shape& s) const {
    K::AttnBwdParams p;
    p.q = q, p.k = k, p.v = v, p.o = o, p.dout = dout, p.lse = lse, p.dq = dq, p.dk = dk, p.dv = dv;
    p.workspace = ws;
    p.B = s.B, p.S = s.S, p.H = s.H, p.H_kv = s.H_kv, p.D = s.D, p.causal = s.causal;
    p.scale = scale(s);
    return p;
  }
};

std::string shape_json(const Shape& s) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "\"B\":%lld,\"S\":%lld,\"Hq\":%lld,\"Hkv\":%lld,\"D\":%lld,\"causal\":%s",
                static_cast<long long>(s.B), static_cast<long long>(s.S), static_cast<long long>(s.H),
                static_cast<long long>(s.H_kv), static_cast<long long>(s.D), s.causal ? "true" : "false");
  return buf;
}

std::string case_name(const Shape& s) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "B%lld_S%lld_Hq%lld_Hkv%lld_D%lld_c%d", static_cast<long long>(s.B),
                static_cast<long long>(s.S), static_cast<long long>(s.H), static_cast<long long>(s.H_kv),
                static_cast<long long>(s.D), s.causal ? 1 : 0);
  return buf;
}

int run_check(const std::string& dump_dir, const std::vector<std::pair<int, int>>& combos) {
  int failures = 0;
  std::uint64_t seed = 1234;
  for (std::int64_t S : {1, 63, 128, 300, 1024})
    for (auto [H, H_kv] : {std::pair<std::int64_t, std::int64_t>{4, 4}, {8, 2}})
      for (std::int64_t D : {64, 128})
        for (bool causal : {true, false}) {
          const Shape s{S <= 300 ? 2 : 1, S, H, H_kv, D, causal};
          const std::vector<std::uint16_t> qb = R::random_bf16(q_elems(s), seed++);
          const std::vector<std::uint16_t> kb = R::random_bf16(kv_elems(s), seed++);
          const std::vector<std::uint16_t> vb = R::random_bf16(kv_elems(s), seed++);
          const std::vector<std::uint16_t> db = R::random_bf16(q_elems(s), seed++);
          if (!dump_dir.empty()) {
            const std::string path = dump_dir + "/" + case_name(s) + ".bin";
            FILE* f = std::fopen(path.c_str(), "wb");
            if (!f) {
              std::fprintf(stderr, "cannot write %s\n", path.c_str());
              return 2;
            }
            for (auto* vec : {&qb, &kb, &vb, &db}) std::fwrite(vec->data(), 2, vec->size(), f);
            std::fclose(f);
          }
          const R::AttnReference ref = R::attention_reference(s, qb, kb, vb, db);
          DeviceBuffers d(s);
          CHECK_CUDA(cudaMemcpy(d.q, qb.data(), d.qb, cudaMemcpyHostToDevice));
          CHECK_CUDA(cudaMemcpy(d.k, kb.data(), d.kvb, cudaMemcpyHostToDevice));
          CHECK_CUDA(cudaMemcpy(d.v, vb.data(), d.kvb, cudaMemcpyHostToDevice));
          CHECK_CUDA(cudaMemcpy(d.dout, db.data(), d.qb, cudaMemcpyHostToDevice));
          for (auto [fv, bv] : combos) {
            T::set_fwd_variant(fv);
            if (bv >= 0) T::set_bwd_variant(bv);  // -1: the per-head-dim defaults
            d.poison_outputs();
            CHECK_CUDA(K::attn_fwd_flash(d.fwd(s), nullptr));
            CHECK_CUDA(K::attn_bwd_flash(d.bwd(s), nullptr));
            CHECK_CUDA(cudaDeviceSynchronize());
            std::vector<std::uint16_t> o(qb.size()), dq(qb.size()), dk(kb.size()), dv(kb.size());
            std::vector<float> lse(static_cast<std::size_t>(s.B * s.H * s.S));
            CHECK_CUDA(cudaMemcpy(o.data(), d.o, d.qb, cudaMemcpyDeviceToHost));
            CHECK_CUDA(cudaMemcpy(dq.data(), d.dq, d.qb, cudaMemcpyDeviceToHost));
            CHECK_CUDA(cudaMemcpy(dk.data(), d.dk, d.kvb, cudaMemcpyDeviceToHost));
            CHECK_CUDA(cudaMemcpy(dv.data(), d.dv, d.kvb, cudaMemcpyDeviceToHost));
            CHECK_CUDA(cudaMemcpy(lse.data(), d.lse, d.lseb, cudaMemcpyDeviceToHost));
            const double eo = R::max_abs_err(o, ref.o), el = R::max_abs_err(lse, ref.lse);
            const double eq = R::max_abs_err(dq, ref.dq), ek = R::max_abs_err(dk, ref.dk);
            const double ev = R::max_abs_err(dv, ref.dv);
            const bool finite = std::isfinite(eo + el + eq + ek + ev);
            failures += finite ? 0 : 1;
            std::printf("{\"kind\":\"check\",\"impl\":\"ulysses_flash\",\"fwd_variant\":%d,\"bwd_variant\":%d,"
                        "\"case\":\"%s\",%s,\"err_o\":%.3e,\"err_lse\":%.3e,\"err_dq\":%.3e,\"err_dk\":%.3e,"
                        "\"err_dv\":%.3e,\"finite\":%s}\n",
                        fv, T::bwd_variant(static_cast<int>(s.D)), case_name(s).c_str(), shape_json(s).c_str(), eo, el, eq, ek, ev,
                        finite ? "true" : "false");
            std::fflush(stdout);
          }
        }
  return failures == 0 ? 0 : 1;
}

double time_ms(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
  return ms;
}

// times fn: one warm-up, then enough repetitions for ~0.2 s (1 to 10); returns mean ms
template <class Fn>
double bench_ms(Fn fn) {
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  CHECK_CUDA(cudaEventRecord(e0));
  CHECK_CUDA(fn());
  CHECK_CUDA(cudaEventRecord(e1));
  CHECK_CUDA(cudaEventSynchronize(e1));
  const double warm = time_ms(e0, e1);
  const int reps = std::max(1, std::min(10, static_cast<int>(200.0 / std::max(warm, 1e-3))));
  CHECK_CUDA(cudaEventRecord(e0));
  for (int i = 0; i < reps; ++i) CHECK_CUDA(fn());
  CHECK_CUDA(cudaEventRecord(e1));
  CHECK_CUDA(cudaEventSynchronize(e1));
  const double ms = time_ms(e0, e1) / reps;
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return ms;
}

__global__ void fill_random(__nv_bfloat16* p, std::int64_t n, std::uint64_t seed) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;  // splitmix64 -> ~N(0,1) via Irwin-Hall(4)
    float acc = 0.f;
    for (int r = 0; r < 4; ++r) {
      x += 0x9E3779B97F4A7C15ull;
      std::uint64_t z = x;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      z ^= z >> 31;
      acc += static_cast<float>(z >> 40) * (1.f / 16777216.f);
    }
    p[i] = __float2bfloat16((acc - 2.f) * 1.7320508f);
  }
}

// the sweep of issue 5 (S=128K non-causal trimmed: 4x the causal work and device time is
// short); quick: S=32K, H=16 only
std::vector<Shape> sweep_points(bool quick) {
  std::vector<Shape> points;
  for (std::int64_t S : {4096, 16384, 32768, 131072})
    for (std::int64_t H : {16, 32})
      for (std::int64_t H_kv : {H, std::int64_t{8}})
        for (std::int64_t D : {64, 128})
          for (bool causal : {true, false}) {
            if (S == 131072 && !causal) continue;
            if (quick && !(S == 32768 && H == 16)) continue;
            points.push_back(Shape{1, S, H, H_kv, D, causal});
          }
  return points;
}

int run_bench(bool quick, const std::vector<Shape>& given) {
  const std::vector<Shape> points = given.empty() ? sweep_points(quick) : given;
  for (const Shape& s : points) {
    DeviceBuffers d(s);
    fill_random<<<1024, 256>>>(d.q, q_elems(s), 1);
    fill_random<<<1024, 256>>>(d.k, kv_elems(s), 2);
    fill_random<<<1024, 256>>>(d.v, kv_elems(s), 3);
    fill_random<<<1024, 256>>>(d.dout, q_elems(s), 4);
    CHECK_CUDA(cudaGetLastError());
    d.poison_outputs();
    const K::AttnFwdParams fp = d.fwd(s);
    const K::AttnBwdParams bp = d.bwd(s);
    const double fwd_ms = bench_ms([&] { return K::attn_fwd_flash(fp, nullptr); });
    const double bwd_ms = bench_ms([&] { return K::attn_bwd_flash(bp, nullptr); });
    const double fwd_flop = 4.0 * s.S * s.S * s.H * s.D * s.B * (s.causal ? 0.5 : 1.0);
    std::printf("{\"kind\":\"bench\",\"impl\":\"ulysses_flash\",\"fwd_variant\":%d,\"bwd_variant\":%d,%s,"
                "\"fwd_ms\":%.4f,\"bwd_ms\":%.4f,\"fwd_tflops\":%.1f,\"bwd_tflops\":%.1f}\n",
                T::fwd_variant(), T::bwd_variant(static_cast<int>(s.D)), shape_json(s).c_str(), fwd_ms, bwd_ms, fwd_flop / fwd_ms * 1e-9, 2.5 * fwd_flop / bwd_ms * 1e-9);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int usage() {
  std::fprintf(stderr,
               "usage: attn_check check [--dump DIR] [--all-variants] [--fwd-variant N] [--bwd-variant N]\n"
               "       attn_check bench [--quick | --one S H HKV D CAUSAL(0|1)] [--fwd-variant N] [--bwd-variant N]\n");
  return 2;
}

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  const std::string mode = argv[1];
  std::string dump;
  bool quick = false, all_variants = false;
  int fv = T::fwd_variant(), bv = -1;  // bv -1: the library's per-head-dim defaults
  std::vector<Shape> given;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    const int left = argc - i - 1;
    if (a == "--dump" && left >= 1) {
      dump = argv[++i];
    } else if (a == "--quick") {
      quick = true;
    } else if (a == "--all-variants") {
      all_variants = true;
    } else if (a == "--fwd-variant" && left >= 1) {
      fv = std::atoi(argv[++i]);
    } else if (a == "--bwd-variant" && left >= 1) {
      bv = std::atoi(argv[++i]);
    } else if (a == "--one" && left >= 5) {
      Shape s;
      s.S = std::atoll(argv[i + 1]), s.H = std::atoll(argv[i + 2]), s.H_kv = std::atoll(argv[i + 3]);
      s.D = std::atoll(argv[i + 4]), s.causal = std::atoi(argv[i + 5]) != 0;
      i += 5;
      if (s.S < 1 || s.H < 1 || s.H_kv < 1 || s.H % s.H_kv != 0 || (s.D != 64 && s.D != 128)) {
        std::fprintf(stderr, "attn_check: --one needs S, H, HKV >= 1, H %% HKV == 0, D in {64, 128}\n");
        return 2;
      }
      given.push_back(s);
    } else {
      std::fprintf(stderr, "attn_check: unknown or incomplete option '%s'\n", a.c_str());
      return usage();
    }
  }
  if (!T::fwd_variant_exists(fv) || (bv != -1 && !T::bwd_variant_exists(bv))) {
    std::string list;
    for (int v : T::kBwdVariants) list += (list.empty() ? "" : ", ") + std::to_string(v);
    std::string fwd;  // the rule is fwd_variant_exists's (bench/attn/attn_tuning.hpp); list what it accepts
    for (int v = 0; v < T::kFwdVariantEnd; ++v)
      if (T::fwd_variant_exists(v)) fwd += (fwd.empty() ? "" : ", ") + std::to_string(v);
    std::fprintf(stderr, "attn_check: --fwd-variant must be one of {%s} and --bwd-variant one of {%s}\n", fwd.c_str(),
                 list.c_str());
    return 2;
  }
  if (mode == "check") {
    std::vector<std::pair<int, int>> combos{{fv, bv}};
    if (all_variants) {  // every bwd variant, the fwd variants alternating
      combos.clear();
      int i = 0;
      constexpr int kFwd[] = {0, 1, 3, 7, 15};  // every forward variant too (bits: tuning header)
      for (int v : T::kBwdVariants) combos.emplace_back(kFwd[i++ % 5], v);
    }
    return run_check(dump, combos);
  }
  if (mode == "bench") {
    T::set_fwd_variant(fv);
    if (bv >= 0) T::set_bwd_variant(bv);
    return run_bench(quick, given);
  }
  return usage();
}
