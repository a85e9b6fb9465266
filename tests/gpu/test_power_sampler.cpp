// runtime/power_sampler.hpp on a GPU: NVML is read while cuBLASLt GEMMs keep the GPU busy for about a second:
// some samples are loaded (>= 40 % of the enforced limit), with an SM clock and a mean power a GPU can have.
#include <catch2/catch.hpp>

#include <chrono>

#include "runtime/power_sampler.hpp"
#include "runtime/cuda/gemm.hpp"
#include "tests/gpu/gpu_util.hpp"

using namespace ulysses;

TEST_CASE("power sampler: a second of GEMMs gives loaded samples with a clock and a power", "[.gpu][gpu][power]") {
  const std::int64_t M = 8192, N = 8192, K = 8192;
  gputest::Dev<__nv_bfloat16> X(M * K), W(N * K), Y(M * N);
  CUDA_CHECK(cudaMemset(X.p, 0x3c, sizeof(__nv_bfloat16) * M * K));  // 0x3c3c: about 0.0115 in bf16
  CUDA_CHECK(cudaMemset(W.p, 0x3c, sizeof(__nv_bfloat16) * N * K));
  runtime::cuda::Gemm gemm;
  gemm.forward(X.p, W.p, Y.p, M, N, K, nullptr);  // tuned outside the sampled second
  CUDA_CHECK(cudaDeviceSynchronize());
  runtime::PowerSampler sampler(10);
  sampler.start();
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(1200)) {
    for (int i = 0; i < 8; ++i) gemm.forward(X.p, W.p, Y.p, M, N, K, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  const auto p = sampler.stop();
  INFO(p.why);
  REQUIRE(p.available);
  CHECK(p.gpus >= 1);
  CHECK(p.loaded > 10);
  CHECK(p.limit_w > 100);
  CHECK(p.sm_mhz_median > 300);
  CHECK(p.sm_mhz_median < 3000);
  CHECK(p.watts_mean >= 0.4 * p.limit_w);
  CHECK(p.watts_mean <= 1.1 * p.limit_w);
  WARN("SM clock median " << p.sm_mhz_median << " MHz, lowest " << p.sm_mhz_min << ", mean " << p.watts_mean << " W of "
                          << p.limit_w << " W, at the cap " << 100 * p.at_cap_fraction << " %, " << p.loaded << " of "
                          << p.samples << " samples loaded");
}
