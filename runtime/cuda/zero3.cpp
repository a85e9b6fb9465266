// runtime/cuda/zero3.hpp: the parts' buffers, and each collective on one tensor.
#include "runtime/cuda/zero3.hpp"

#include <stdexcept>

#include "core/bf16.hpp"
#include "runtime/cuda/cuda_check.hpp"

namespace ulysses::runtime::cuda {

Zero3Shards::Zero3Shards(BufferSet& b, StepCollectives& comm, std::vector<ShardedTensor> tensors, bool params_on_host,
                         std::vector<void*> grads)
    : comm_(comm), P_(comm.ranks()), r_(comm.rank()), t_(std::move(tensors)), on_host_(params_on_host) {
  if (!grads.empty() && (P_ != 1 || grads.size() != t_.size()))
    throw std::invalid_argument("ZeRO-3: only one rank gives its gradient parts, one per tensor");
  for (const ShardedTensor& t : t_)
    if (t.n < 1 || t.n % (8 * static_cast<std::int64_t>(P_)) != 0)
      throw std::invalid_argument("ZeRO-3 at sp " + std::to_string(P_) + ": tensor " + t.name + " has " + std::to_string(t.n) +
                                  " elements, not a multiple of 8 * sp (parts are not padded)");
  for (std::size_t i = 0; i < t_.size(); ++i) {
    if (!on_host_) {
      param_.push_back(b.take<bf16_t>(part_elems(i)));
      continue;
    }
    host_parts_.push_back(alloc_pinned(part_elems(i) * 2));
    param_.push_back(static_cast<bf16_t*>(host_parts_.back().get()));
    host_bytes_ += part_elems(i) * 2;
  }
  if (!grads.empty()) {
    grad_ = std::move(grads);
    return;
  }
  for (std::size_t i = 0; i < t_.size(); ++i)
    grad_.push_back(t_[i].grad_fp32 ? static_cast<void*>(b.take<float>(part_elems(i))) : static_cast<void*>(b.take<bf16_t>(part_elems(i))));
}

void Zero3Shards::keep_part(std::size_t i, const bf16_t* full, cudaStream_t s) {
  const std::int64_t m = part_elems(i);
  CUDA_CHECK(cudaMemcpyAsync(param_[i], full + r_ * m, static_cast<std::size_t>(m) * 2,
                             on_host_ ? cudaMemcpyDeviceToHost : cudaMemcpyDeviceToDevice, s));
}

void Zero3Shards::fetch(std::size_t i, bf16_t* full, cudaStream_t s) {
  if (!on_host_) return;
  const std::int64_t m = part_elems(i);
  CUDA_CHECK(cudaMemcpyAsync(full + r_ * m, param_[i], static_cast<std::size_t>(m) * 2, cudaMemcpyHostToDevice, s));
}

// On the host, the part was fetched into full's own slice: the all-gather runs in place (NCCL's in-place form,
// sendbuff = recvbuff + rank * count).
void Zero3Shards::gather(std::size_t i, bf16_t* full, cudaStream_t s) {
  const std::int64_t m = part_elems(i);
  comm_.all_gather(on_host_ ? full + r_ * m : param_[i], full, m, Elem::bf16, s);
}

void Zero3Shards::gather_ahead(std::size_t i, bf16_t* full, cudaStream_t s) {
  const std::int64_t m = part_elems(i);
  comm_.all_gather_ahead(on_host_ ? full + r_ * m : param_[i], full, m, Elem::bf16, s);
}

void Zero3Shards::reduce(std::size_t i, const void* full_grad, cudaStream_t s) {
  if (P_ == 1 && full_grad == grad_[i]) return;  // one rank's full gradient is its part: nothing to reduce
  comm_.reduce_scatter(full_grad, grad_[i], part_elems(i), t_[i].grad_fp32 ? Elem::f32 : Elem::bf16, s);
}

std::vector<ParamRef> Zero3Shards::parts() const {
  std::vector<ParamRef> p;
  for (std::size_t i = 0; i < t_.size(); ++i) p.push_back({param_[i], grad_[i], t_[i].grad_fp32, part_elems(i)});
  return p;
}

std::vector<double> Zero3Shards::param_part(std::size_t i) const {
  if (!on_host_) return download_doubles(param_.at(i), part_elems(i));
  // (the initial copy ran on the legacy stream, which the runner's constructor synchronized; later writes are the
  // host optimizer's)
  std::vector<double> out(static_cast<std::size_t>(part_elems(i)));
  const auto* bits = reinterpret_cast<const core::bf16*>(param_[i]);
  for (std::size_t k = 0; k < out.size(); ++k) out[k] = core::bf16_to_float(bits[k]);
  return out;
}

std::vector<double> Zero3Shards::grad_part(std::size_t i) const {
  return t_.at(i).grad_fp32 ? download_doubles(static_cast<const float*>(grad_[i]), part_elems(i))
                            : download_doubles(static_cast<const bf16_t*>(grad_[i]), part_elems(i));
}

}  // namespace ulysses::runtime::cuda
