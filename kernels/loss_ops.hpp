#pragma once
// The step's kernels around the decoder layers (issue 13): seeded parameter fills, the token
// embedding forward and backward, and the loss head's cross-entropy over one chunk of logits. HF
// semantics (runtime/reference_step.hpp is their fp64 oracle): the cross-entropy is computed in fp32
// from bf16 logits, labels kIgnoreLabel (-100) contribute neither loss nor gradient.
// Plain C++ header: includable from .cpp (g++) and .cu (nvcc).
//
// Shapes (T tokens of this rank, V vocabulary, h hidden, Tc tokens of one logits chunk):
//   tokens [T] int32 in [0, V)        labels [Tc] int32 in [0, V) or -100
//   embed [V, h] bf16                 x, dx [T, h] bf16             d_embed [V, h] fp32
//   logits [Tc, V] bf16 (overwritten by dlogits)                     loss_rows [Tc] fp32
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace ulysses::kernels {

// x[i] = bf16(bias + scale * seeded_value(seed, tensor, i)), i < n (kernels/testdata.cuh's generator;
// seeded_param_value gives the host the same bits).
cudaError_t fill_seeded_param(__nv_bfloat16* x, std::int64_t n, std::uint64_t seed, std::uint32_t tensor, float bias,
                              float scale, cudaStream_t stream);

// x[t] = embed[tokens[t]] (rows of h).
cudaError_t embedding_fwd(const __nv_bfloat16* embed, const std::int32_t* tokens, __nv_bfloat16* x, std::int64_t T,
                          std::int64_t h, cudaStream_t stream);
// d_embed[tokens[t]] += dx[t] (fp32 atomics: the order of a repeated token's sums varies run to run).
cudaError_t embedding_bwd(const __nv_bfloat16* dx, const std::int32_t* tokens, float* d_embed, std::int64_t T,
                          std::int64_t h, cudaStream_t stream);

// Per row t of a logits chunk: loss_rows[t] = logsumexp(logits[t]) - logits[t][labels[t]] (0 when
// ignored), and logits[t] is overwritten by the gradient of sum(loss_rows) / divisor:
// (softmax(logits[t]) - onehot(labels[t])) / divisor in bf16 (0 when ignored).
cudaError_t cross_entropy_fwd_bwd(__nv_bfloat16* logits, const std::int32_t* labels, float* loss_rows,
                                  std::int64_t Tc, std::int64_t V, float divisor, cudaStream_t stream);

// d_embed += widen(d_head), n elements (a tied embedding's two gradients in one fp32 tensor).
cudaError_t add_bf16_to_fp32(const __nv_bfloat16* d_head, float* d_embed, std::int64_t n, cudaStream_t stream);

}  // namespace ulysses::kernels
