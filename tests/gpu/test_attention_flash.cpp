// Flash attention kernels against the fp64 CPU reference (runtime/reference_attention.hpp) on
// fresh random inputs, outputs poisoned (NaN) before each run. Tolerances: twice the largest
// error PyTorch's flash backend showed against an fp64 reference on the same shapes and input
// distribution (the attn_peer.py check of docs/ATTENTION.md, H200, 2026-11-30).
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/attention_flash.hpp"
#include "runtime/reference_attention.hpp"

namespace {

using ulysses::runtime::AttnDims;
namespace K = ulysses::kernels;
namespace R = ulysses::runtime;

struct Errors {
  double o, lse, dq, dk, dv;
};

template <class T>
T* device_alloc(std::size_t bytes) {
  void* p = nullptr;
  REQUIRE(cudaMalloc(&p, bytes) == cudaSuccess);
  REQUIRE(cudaMemset(p, 0xFF, bytes) == cudaSuccess);  // poison: NaN in bf16 and fp32
  return static_cast<T*>(p);
}

Errors run_case(const AttnDims& s, std::uint64_t seed) {
  const std::int64_t q_elems = s.B * s.S * s.H * s.D, kv_elems = s.B * s.S * s.H_kv * s.D;
  const std::vector<std::uint16_t> qb = R::random_bf16(q_elems, seed), kb = R::random_bf16(kv_elems, seed + 1);
  const std::vector<std::uint16_t> vb = R::random_bf16(kv_elems, seed + 2), db = R::random_bf16(q_elems, seed + 3);
  const std::size_t qbytes = qb.size() * 2, kvbytes = kb.size() * 2;
  const std::size_t lsebytes = static_cast<std::size_t>(s.B * s.H * s.S) * 4;
  const std::size_t wsbytes = K::attn_bwd_flash_workspace_bytes(s.B, s.S, s.H, s.H_kv, s.D);
  auto* q = device_alloc<__nv_bfloat16>(qbytes);
  auto* k = device_alloc<__nv_bfloat16>(kvbytes);
  auto* v = device_alloc<__nv_bfloat16>(kvbytes);
  auto* dout = device_alloc<__nv_bfloat16>(qbytes);
  auto* o = device_alloc<__nv_bfloat16>(qbytes);
  auto* dq = device_alloc<__nv_bfloat16>(qbytes);
  auto* dk = device_alloc<__nv_bfloat16>(kvbytes);
  auto* dv = device_alloc<__nv_bfloat16>(kvbytes);
  auto* lse = device_alloc<float>(lsebytes);
  void* ws = device_alloc<unsigned char>(wsbytes);
  REQUIRE(cudaMemcpy(q, qb.data(), qbytes, cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(cudaMemcpy(k, kb.data(), kvbytes, cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(cudaMemcpy(v, vb.data(), kvbytes, cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(cudaMemcpy(dout, db.data(), qbytes, cudaMemcpyHostToDevice) == cudaSuccess);

  K::AttnFwdParams fp;
  fp.q = q, fp.k = k, fp.v = v, fp.o = o, fp.lse = lse;
  fp.B = s.B, fp.S = s.S, fp.H = s.H, fp.H_kv = s.H_kv, fp.D = s.D, fp.causal = s.causal;
  fp.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.D)));
  REQUIRE(K::attn_fwd_flash(fp, nullptr) == cudaSuccess);
  K::AttnBwdParams bp;
  bp.q = q, bp.k = k, bp.v = v, bp.o = o, bp.dout = dout, bp.lse = lse, bp.dq = dq, bp.dk = dk, bp.dv = dv;
  bp.workspace = ws;
  bp.B = s.B, bp.S = s.S, bp.H = s.H, bp.H_kv = s.H_kv, bp.D = s.D, bp.causal = s.causal;
  bp.scale = fp.scale;
  REQUIRE(K::attn_bwd_flash(bp, nullptr) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);

  std::vector<std::uint16_t> ho(qb.size()), hdq(qb.size()), hdk(kb.size()), hdv(kb.size());
  std::vector<float> hl(static_cast<std::size_t>(s.B * s.H * s.S));
  REQUIRE(cudaMemcpy(ho.data(), o, qbytes, cudaMemcpyDeviceToHost) == cudaSuccess);
  REQUIRE(cudaMemcpy(hdq.data(), dq, qbytes, cudaMemcpyDeviceToHost) == cudaSuccess);
  REQUIRE(cudaMemcpy(hdk.data(), dk, kvbytes, cudaMemcpyDeviceToHost) == cudaSuccess);
  REQUIRE(cudaMemcpy(hdv.data(), dv, kvbytes, cudaMemcpyDeviceToHost) == cudaSuccess);
  REQUIRE(cudaMemcpy(hl.data(), lse, lsebytes, cudaMemcpyDeviceToHost) == cudaSuccess);
  for (void* p : {static_cast<void*>(q), static_cast<void*>(k), static_cast<void*>(v), static_cast<void*>(dout),
                  static_cast<void*>(o), static_cast<void*>(dq), static_cast<void*>(dk), static_cast<void*>(dv),
                  static_cast<void*>(lse), ws})
    cudaFree(p);

  const R::AttnReference ref = R::attention_reference(s, qb, kb, vb, db);
  return {R::max_abs_err(ho, ref.o), R::max_abs_err(hl, ref.lse), R::max_abs_err(hdq, ref.dq),
          R::max_abs_err(hdk, ref.dk), R::max_abs_err(hdv, ref.dv)};
}

// 2x PyTorch flash's largest error on S in {63, 128, 300}, H/H_kv in {4/4, 8/2}, D in {64, 128}
void check_within_tolerance(const Errors& e) {
  constexpr double tol_o = 2 * 8.8e-3, tol_lse = 2 * 1.1e-6, tol_dq = 2 * 1.3e-2, tol_dk = 2 * 2.9e-2,
                   tol_dv = 2 * 3.4e-2;
  CHECK(e.o <= tol_o);
  CHECK(e.lse <= tol_lse);
  CHECK(e.dq <= tol_dq);
  CHECK(e.dk <= tol_dk);
  CHECK(e.dv <= tol_dv);
}

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

}  // namespace

TEST_CASE("flash attention matches the fp64 reference within 2x of PyTorch flash's error", "[.gpu][flash]") {
  if (!have_gpu()) {
    WARN("no CUDA device: skipped");
    return;
  }
  std::uint64_t seed = 777;
  // S: one row, below one tile, one tile + 1 (ragged tail), several ragged tiles
  for (std::int64_t S : {1, 63, 129, 300})
    for (auto [H, H_kv] : {std::pair<std::int64_t, std::int64_t>{4, 4}, {8, 2}})
      for (std::int64_t D : {64, 128})
        for (bool causal : {true, false}) {
          const AttnDims s{2, S, H, H_kv, D, causal};
          INFO("S=" << S << " H=" << H << " H_kv=" << H_kv << " D=" << D << " causal=" << causal);
          check_within_tolerance(run_case(s, seed));
          seed += 4;
        }
}

// The product runs the default variants only (kernels/attention_flash_defaults.hpp); the other
// wgmma variants (forward 3 plain, 7 pipelined, 15 ping-pong, the TMA forms 31, 63, 95, 127; backward 2048, 8192, 12288)
// are checked by the lab: attn_check check --fwd-variant V / --bwd-variant V (bench/attn/run_sm90a.sh, run_tma.sh).
TEST_CASE("Hopper wgmma attention kernels: the defaults match the fp64 reference", "[.gpu][flash]") {
  if (!have_gpu()) {
    WARN("no CUDA device: skipped");
    return;
  }
  int dev = 0, major = 0, minor = 0;
  REQUIRE(cudaGetDevice(&dev) == cudaSuccess);
  REQUIRE(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess);
  REQUIRE(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess);
  if (major != 9 || minor != 0) {
    WARN("not an sm_90 device: the wgmma kernels do not run here");
    return;
  }
  // on sm_90 the default D=128 kernels are the wgmma ones (this build has sm_90a code): the forward in its
  // TMA form with the producer warpgroup (1471: 176-key tiles for the full mask at D=128; bit 128, the D=64
  // instance) and the wgmma backward's TMA form with FlashAttention-3's dQ path behind its producer warpgroup (368640);
  // D=64 the same forward
  // and the D=64 wgmma backward with the same dQ path and 128-row q tiles (245760). A build that overrides the
  // defaults checks what it names.
#if defined(ULYSSES_FLASH_FWD_DEFAULT) || defined(ULYSSES_FLASH_BWD_DEFAULT_D128) || defined(ULYSSES_FLASH_BWD_DEFAULT_D64)
  WARN("defaults overridden in this build: " << K::attn_flash_kernels_in_use(128) << "; " << K::attn_flash_kernels_in_use(64));
#else
  REQUIRE(K::attn_flash_kernels_in_use(128) == "wgmma sm_90a fwd 1471 / bwd 368640");
  REQUIRE(K::attn_flash_kernels_in_use(64) == "wgmma sm_90a fwd 1471 / bwd 245760");
#endif
  std::uint64_t seed = 4242;
  // one row, below a tile, exact tiles (128, 256: no ragged tail, warpgroup 1 all valid),
  // ragged tails, several q and key tiles (pipelined steps); GQA groups 2 and 16 (long head loop)
  for (std::int64_t D : {128, 64})
  for (std::int64_t S : {1, 63, 128, 129, 256, 300, 1000})
    for (auto [H, H_kv] : {std::pair<std::int64_t, std::int64_t>{4, 4}, {8, 2}, {16, 1}})
      for (bool causal : {true, false}) {
        const AttnDims s{2, S, H, H_kv, D, causal};
        INFO("D=" << D << " S=" << S << " H=" << H << " H_kv=" << H_kv << " causal=" << causal);
        check_within_tolerance(run_case(s, seed));
        seed += 4;
      }
}

TEST_CASE("flash attention rejects unsupported shapes", "[.gpu][flash]") {
  if (!have_gpu()) {
    WARN("no CUDA device: skipped");
    return;
  }
  K::AttnFwdParams fp;
  fp.S = 16, fp.H = 4, fp.H_kv = 4, fp.D = 96, fp.scale = 0.1f;  // D=96: no kernel
  CHECK(K::attn_fwd_flash(fp, nullptr) == cudaErrorInvalidValue);
  fp.D = 64, fp.H_kv = 3;  // H % H_kv != 0
  CHECK(K::attn_fwd_flash(fp, nullptr) == cudaErrorInvalidValue);
  K::AttnBwdParams bp;
  bp.S = 0, bp.H = 4, bp.H_kv = 4, bp.D = 64;
  CHECK(K::attn_bwd_flash(bp, nullptr) == cudaErrorInvalidValue);
}
