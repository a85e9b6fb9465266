#pragma once
// The attention benches' device buffers (q, k, v, o, dout, dq, dk, dv, lse, workspace), their
// fill and poison, the kernels' parameters over them, and the validator: #wrong of one
// attention kernel's fwd + bwd against the fp64 oracle (runtime/reference_attention.hpp).
#include <cstdint>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "kernels/attention.hpp"
#include "runtime/cuda/device_memory.hpp"
#include "runtime/cuda/cluster.hpp"

namespace ulysses::bench {

struct AttnBufs {
  runtime::cuda::DevBuf<std::uint16_t> q, k, v, o, dout, dq, dk, dv;
  runtime::cuda::DevBuf<float> lse;
  runtime::cuda::DevBuf<std::uint8_t> ws;
};

// with_reference: the workspace is large enough for the reference kernel too.
AttnBufs attn_bufs(runtime::cuda::DeviceArena& a, std::int64_t B, std::int64_t S, std::int64_t H, std::int64_t H_kv,
                   std::int64_t D, bool with_reference = true);
// All-ones bytes (NaN in bf16 and fp32) in every output and the workspace: what a kernel does
// not write stays NaN and fails the checks.
void poison_outputs(AttnBufs& b, cudaStream_t st);
void fill_attn(AttnBufs& b, std::int64_t B, std::int64_t S, std::int64_t H, std::int64_t H_kv, std::int64_t D,
               std::uint64_t seed, cudaStream_t st);
kernels::AttnFwdParams fwd_params(AttnBufs& b, std::int64_t B, std::int64_t S, std::int64_t H, std::int64_t H_kv,
                                  std::int64_t D, bool causal);
kernels::AttnBwdParams bwd_params(AttnBufs& b, const kernels::AttnFwdParams& f);
// A device bf16 tensor widened to float on the host.
std::vector<float> widen_dev(const runtime::cuda::DevBuf<std::uint16_t>& x);
// The check_close tolerance of an attention output: kBf16AttentionTol; the flash kernel's
// gradients twice that (as tests/gpu/test_attention.cpp): like FlashAttention-2 it rounds P and
// dS to bf16 before the backward's tensor-core MMAs, which costs about 2x the reference
// kernel's (fp32 P) error in dq, dk, dv. (A CPU emulation of those rounding points on the
// sweep's inputs reproduces the 1x-rule failures the H200 showed: dk/dv only, worst 1.1-1.5x.)
double attention_tol(kernels::AttnKernel kind, const std::string& name);

// #wrong of fwd (o) + bwd (dq, dk, dv) of `kind` against the fp64 oracle at a small S.
// (-1 and a note "not available: ..." when the kernel refuses the shape; worst_out: the worst
// error in units of its tolerance; per_output_wrong: "o N, dq N, dk N, dv N".)
std::int64_t validate_attention(runtime::cuda::RankCtx& ctx, kernels::AttnKernel kind, std::int64_t B, std::int64_t S,
                                std::int64_t H, std::int64_t H_kv, std::int64_t D, bool causal, std::uint64_t seed,
                                std::string& note, double* worst_out = nullptr, std::string* per_output_wrong = nullptr);

}  // namespace ulysses::bench
