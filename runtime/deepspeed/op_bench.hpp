#pragma once
// Single ops of the PyTorch step timed by the worker (ulysses_worker/opbench.py) during
// `calibrate --backend deepspeed`, read back from rank 0's result: raw times, no model in them.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ulysses::runtime::deepspeed {

struct OpBench {
  struct Attention {                   // the HF attention function on one rank's heads
    std::string impl;                  // sdpa | flash_attention_2 | ...
    std::int64_t S = 0, H = 0, H_kv = 0, D = 0;  // H, H_kv: heads on the rank (after the exchange)
    bool causal = true;
    double fwd_s = 0, bwd_s = 0;       // medians; bwd = (fwd + bwd) - fwd
  };
  struct Gemm {                        // one bf16 matmul product [M, K] x [K, N]
    std::string op;                    // <linear>.<fwd|dgrad|wgrad>
    double M = 0, N = 0, K = 0, s = 0;
  };
  struct Eager {                       // one elementwise pass of the HF decoder layer, alone
    std::string op;                    // rmsnorm | headnorm | rope | add | swiglu | embed
    double T = 0;                      // tokens on the rank
    double elems = 0;                  // elements of the op's tensor (rope: q and k together)
    double extra_elems = 0;            // embed: V * h (the dense gradient); else 0
    double fwd_s = 0, bwd_s = 0;       // medians; bwd = (fwd + bwd) - fwd, >= 0 (0: no kernel)
  };
  std::vector<Attention> attention;
  std::vector<Gemm> gemm;
  std::vector<Eager> eager;            // empty: not measured (op benches before 2026-12-02 late)
  struct ZeroStep {                    // DeepSpeed ZeRO-3 on a stack of Linear layers, one rank
    bool offload_optimizer = false;
    bool torch_adam = false;           // the GPU optimizer was torch.optim.AdamW (else FusedAdam)
    double params = 0;
    double step_s = 0, bwd_s = 0;      // engine.step(), engine.backward(): medians
  };
  std::vector<ZeroStep> zero_step;     // empty: not measured
  std::int64_t adamw_params = 0;       // torch.optim.AdamW over one flat fp32 partition
  double adamw_s = -1;                 // -1: not measured
  std::string adamw_impl;
  std::int64_t cpu_adam_params = 0;    // DeepSpeedCPUAdam over fp32 host parameters
  double cpu_adam_s = -1;
  int cpu_adam_threads = 0;
};

// The "ops" object of a worker result. Throws std::runtime_error naming the key when a row is
// malformed or a time is not a positive finite number.
OpBench op_bench_of(const nlohmann::ordered_json& ops);

}  // namespace ulysses::runtime::deepspeed
