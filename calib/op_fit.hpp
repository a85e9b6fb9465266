#pragma once
// The deepspeed worker's op bench (runtime/deepspeed/op_bench.hpp) turned into calibrated keys of a
// profile: what each single op of the PyTorch step achieves on this host (docs/MODEL.md "Time").
//   attention  attn_fwd_eff / attn_bwd_eff curves over S, filed per shape as
//              <impl>@d<D>.<causal|full>.h<H on the rank> (sim/attn_key.hpp); eff = FLOPs / t / peak
//              with FLOPs = core::attention_flops (FlashAttention's count, the model's);
//   gemm       the gemm_eff curve over M*N*K, eff = 2 M N K / t / peak; rows of equal M*N*K share
//              their median;
//   optimizers torch_adamw_ns_per_param (torch.optim.AdamW.step on the GPU) and
//              cpu_adam_ns_per_param (DeepSpeedCPUAdam.step, one process on every host core);
//   eager      eager_bytes_per_elem.<op>.<pass> (sim/eager.hpp): the slope of time over elements
//              (least squares over the token counts) times hbm_GBps; embed.grad from the
//              embedding backward's intercept per element of its dense gradient [V, h].
// Pure: no I/O, tested with made-up benches.
#include <string>
#include <vector>

#include "runtime/deepspeed/op_bench.hpp"
#include "sim/scenario.hpp"

namespace ulysses::calib {

// Sets the keys above in `c` (a curve filed under the same key is replaced; other keys stay) and
// returns one line per key set. peak_flops: the profile's bf16 dense FLOP/s; hbm_GBps its HBM
// bandwidth (the eager rates are bytes at that bandwidth). Throws
// std::runtime_error when a measured efficiency is not in (0, 1] (a wrong peak or a broken bench).
std::vector<std::string> apply_op_bench(const runtime::deepspeed::OpBench& b, double peak_flops, double hbm_GBps,
                                        Calibration& c);

}  // namespace ulysses::calib
