#pragma once
// The optimizer step of a bf16 training run in fp64 (issue 13): the oracle of our runtime's optimizer
// (kernels/optim_ops.hpp, runtime/cuda/optimizer.hpp), and the rule both follow.
//
// What HF Trainer + DeepSpeed ZeRO (bf16) do at `engine.step()` (DeepSpeed 0.19.8, docs/STEP_RUNTIME.md
// "Optimizer" quotes the places):
//   - the global L2 norm of every gradient (runtime/zero/stage3.py: the norm of the fp32 gradient partitions);
//   - clipping to `gradient_clipping` (HF: max_grad_norm, default 1.0), stage3.py unscale_and_clip_grads:
//     clip = (norm + 1e-6) / max_norm; the gradients are multiplied by 1 / clip when clip > 1;
//   - FusedAdam in AdamW mode on the fp32 master weights (csrc/adam/multi_tensor_adam.cu, ADAM_MODE_1):
//     m = b1 m + (1 - b1) g,  v = b2 v + (1 - b2) g^2,
//     p -= lr ((m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) + weight_decay p);
//   - the bf16 parameters copied from the updated fp32 master weights (rounded to nearest even).
// The defaults are HF TrainingArguments' (learning_rate 5e-5, adam_beta1 0.9, adam_beta2 0.999,
// adam_epsilon 1e-8, weight_decay 0, max_grad_norm 1), which Accelerate's "auto" config values take.
#include <cstdint>
#include <vector>

namespace ulysses::runtime {

struct AdamConfig {
  double lr = 5e-5, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  double max_grad_norm = 1.0;  // <= 0: no clipping
};

// One parameter tensor's optimizer state (master weights in fp32 on the device, here in fp64).
struct AdamState {
  std::vector<double> master, m, v;
};

// The global norm of all gradients and the coefficient they are multiplied by (1 when not clipped).
struct ClipResult {
  double norm = 0, coef = 1;
};
ClipResult clip_gradients(const std::vector<const std::vector<double>*>& grads, double max_norm);
// The rule alone, from a global norm (ZeRO: the norm over every rank's partitions).
ClipResult clip_of_norm(double norm, double max_norm);

// A fresh state from the parameters' values (m = v = 0).
AdamState adam_state_from(const std::vector<double>& params);

// One AdamW step t (1, 2, ...) of one tensor with gradient grad * coef.
void adamw_reference(AdamState& s, const std::vector<double>& grad, double coef, std::int64_t t, const AdamConfig& c);

}  // namespace ulysses::runtime
