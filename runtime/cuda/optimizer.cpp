// runtime/cuda/optimizer.hpp: the state's buffers, then the step: every tensor's partial sums of
// squares, the norm and coefficient (on the device: no host round trip), AdamW per tensor.
#include "runtime/cuda/optimizer.hpp"

#include <cmath>
#include <stdexcept>

#include "kernels/optim_ops.hpp"
#include "sim/step_runtime_memory.hpp"

namespace ulysses::runtime::cuda {

static_assert(kernels::kNormBlocks == kOptimNormBlocks, "sim/step_runtime_memory.hpp mirrors the norm's partial sums");

AdamW::AdamW(BufferSet& b, std::vector<ParamRef> params, const AdamConfig& c, StepCollectives* ranks) : c_(c), ranks_(ranks) {
  if (params.empty()) throw std::invalid_argument("AdamW: no parameters");
  for (const ParamRef& r : params) {
    if (!r.param || !r.grad || r.n < 1) throw std::invalid_argument("AdamW: a parameter without tensor, gradient or elements");
    Slot s{r, b.take<float>(r.n), b.take<float>(r.n), b.take<float>(r.n)};
    p_.push_back(s);
  }
  partials_ = b.take<float>(static_cast<std::int64_t>(p_.size()) * kernels::kNormBlocks);
  norm_coef_ = b.take<float>(2);
  if (ranks_ && ranks_->ranks() > 1)
    all_partials_ = b.take<float>(static_cast<std::int64_t>(ranks_->ranks()) * static_cast<std::int64_t>(p_.size()) * kernels::kNormBlocks);
  for (const Slot& s : p_) {
    CUDA_CHECK(kernels::widen_bf16(s.ref.param, s.master, s.ref.n, nullptr));
    CUDA_CHECK(cudaMemsetAsync(s.m, 0, static_cast<std::size_t>(s.ref.n) * 4, nullptr));
    CUDA_CHECK(cudaMemsetAsync(s.v, 0, static_cast<std::size_t>(s.ref.n) * 4, nullptr));
  }
  CUDA_CHECK(cudaDeviceSynchronize());
}

void AdamW::step(cudaStream_t stream) {
  ++t_;
  for (std::size_t i = 0; i < p_.size(); ++i) {
    float* part = partials_ + i * kernels::kNormBlocks;
    const ParamRef& r = p_[i].ref;
    CUDA_CHECK(r.grad_fp32 ? kernels::grad_sq_partials(static_cast<const float*>(r.grad), r.n, part, stream)
                           : kernels::grad_sq_partials(static_cast<const bf16_t*>(r.grad), r.n, part, stream));
  }
  const std::int64_t count = static_cast<std::int64_t>(p_.size()) * kernels::kNormBlocks;
  if (all_partials_) ranks_->all_gather(partials_, all_partials_, count, Elem::f32, stream);
  CUDA_CHECK(kernels::clip_coefficient(all_partials_ ? all_partials_ : partials_, all_partials_ ? ranks_->ranks() * count : count,
                                       static_cast<float>(c_.max_grad_norm), norm_coef_, stream));
  kernels::AdamStep hp;
  hp.lr = float(c_.lr), hp.beta1 = float(c_.beta1), hp.beta2 = float(c_.beta2), hp.eps = float(c_.eps);
  hp.weight_decay = float(c_.weight_decay);
  hp.bias_correction1 = float(1 - std::pow(c_.beta1, double(t_)));
  hp.bias_correction2 = float(1 - std::pow(c_.beta2, double(t_)));
  for (const Slot& s : p_) {
    const ParamRef& r = s.ref;
    CUDA_CHECK(r.grad_fp32 ? kernels::adamw_step(r.param, s.master, s.m, s.v, static_cast<const float*>(r.grad), r.n, hp,
                                                 norm_coef_ + 1, stream)
                           : kernels::adamw_step(r.param, s.master, s.m, s.v, static_cast<const bf16_t*>(r.grad), r.n, hp,
                                                 norm_coef_ + 1, stream));
  }
}

AdamState AdamW::state(std::size_t i) const {
  const Slot& s = p_.at(i);
  return {download_doubles(s.master, s.ref.n), download_doubles(s.m, s.ref.n), download_doubles(s.v, s.ref.n)};
}

ClipResult AdamW::last_clip() const {
  const std::vector<double> nc = download_doubles(norm_coef_, 2);
  return {nc[0], nc[1]};
}

}  // namespace ulysses::runtime::cuda
