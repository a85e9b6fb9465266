#pragma once
// `calibrate --backend cuda`: our runtime's elementwise kernels around the GEMMs and attention
// (kernels/layer_ops.hpp, kernels/loss_ops.hpp), each timed alone at one Llama-3.1-8B-like shape, as
// the step model's rates for plan.runtime ulysses (calibrated.ulysses_bytes_per_elem, sim/eager.hpp):
// bytes per element = median time * hbm_GBps / elements, with the elements each rate is charged per
// (sim/eager_time.cpp): [T, h] for the norms, adds and the embedding's token part, [T, (H + H_kv) D]
// for RoPE and Qwen3's head norms (q then k), [T, F] for SwiGLU, [V, h] for the embedding gradient's
// memset, [Tc, V] for the cross-entropy, the parameters of one [F, h] tensor with a bf16 gradient for the
// optimizer (its norm pass, the clipping coefficient, AdamW: what runtime/cuda/optimizer.cpp runs per tensor). Inputs are seeded (kernels/testdata.cuh); each kernel runs once and its output must be
// free of NaN and infinity before it is timed (std::runtime_error otherwise); their values against the fp64
// oracles are checked by the GPU tests and `bench layer`.
#include <array>
#include <cstdint>
#include <string>

#include "sim/eager.hpp"

namespace ulysses::calib::cuda {

struct KernelRateShape {
  std::int64_t T = 32768, h = 4096, F = 14336, H = 32, H_kv = 8, D = 128, V = 128256, T_loss = 4096;
};

// Bytes per element at hbm_GBps, in EagerRate order; < 0 for rates not measured here (the loss's
// backward: our runtime has no such kernel). `report` gets one line per rate.
std::array<double, kEagerRates> ulysses_kernel_rates(double hbm_GBps, int warmup, int iters, std::string& report,
                                                     const KernelRateShape& s = {}, int device = 0);

}  // namespace ulysses::calib::cuda
