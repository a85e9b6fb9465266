#pragma once
// ZeRO-3 over the ranks of the sequence-parallel step (sp = P > 1, or one rank with offload_params: OneRank;
// runtime/cuda/step_runner.hpp): each parameter
// tensor, flat, is cut into P equal parts and rank r keeps part r of its bf16 values and of its gradient (in the
// gradient's type: fp32 for the norms' weights and the embedding, bf16 for the matrices), and the optimizer's
// fp32 state of that part (runtime/cuda/optimizer.hpp over parts()). Before use a tensor is all-gathered into a full
// buffer of the caller's, and after the backward wrote its full gradient that is reduce-scattered into the part (the
// caller's buffers: two layer slots and, at P > 1, one layer gradient slot; the embedding, final norm and lm_head
// whole for the step, runtime/cuda/step_runner.hpp; at P = 1 the caller's full gradients are the parts). A tensor's elements must be a multiple of 8 P (no padding; every tensor of
// the models in scenarios/models/ at sp <= 16); the constructor says which one is not.
// With the parameters offloaded (offload_params, DeepSpeed's offload_param), the bf16 parts live in pinned host
// memory owned here: fetch() copies a part into the rank's own slice of the full buffer, and gather() all-gathers
// in place around it (phase offload.params, then zero.allgather); the host optimizer updates the parts there.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/cuda/decoder_layer.hpp"
#include "runtime/cuda/optimizer.hpp"
#include "runtime/cuda/step_collectives.hpp"

namespace ulysses::runtime::cuda {

struct ShardedTensor {
  std::string name;  // for the error line (embed, final_norm, lm_head, layer3.wq, ...)
  std::int64_t n;    // the full tensor's elements
  bool grad_fp32;
};

class Zero3Shards {
 public:
  // The parts' buffers from b: every tensor's bf16 part [n / P] (params_on_host: pinned host memory instead),
  // then every gradient part [n / P]. One rank may give its gradient parts instead (grads, one per tensor in its
  // type: at P = 1 a part is the whole gradient, so the caller's full gradients serve and each reduce is none).
  Zero3Shards(BufferSet& b, StepCollectives& comm, std::vector<ShardedTensor> tensors, bool params_on_host = false,
              std::vector<void*> grads = {});
  Zero3Shards(const Zero3Shards&) = delete;
  Zero3Shards& operator=(const Zero3Shards&) = delete;

  std::size_t tensors() const { return t_.size(); }
  std::int64_t part_elems(std::size_t i) const { return t_.at(i).n / P_; }
  // tensor i's part of `full` kept as this rank's (its initial values), on `stream`
  void keep_part(std::size_t i, const bf16_t* full, cudaStream_t stream);
  bool params_on_host() const { return on_host_; }
  std::int64_t host_bytes() const { return host_bytes_; }  // the pinned parts
  // params on the host: tensor i's part into full's slice of this rank (offload.params); else nothing
  void fetch(std::size_t i, bf16_t* full, cudaStream_t stream);
  // full [n] = tensor i's parts of every rank (zero.allgather; params on the host: after fetch, in place)
  void gather(std::size_t i, bf16_t* full, cudaStream_t stream);
  // the same as a prefetch (StepCollectives::all_gather_ahead): `stream` sees it after join(stream)
  void gather_ahead(std::size_t i, bf16_t* full, cudaStream_t stream);
  void join(cudaStream_t stream) { comm_.join(stream); }
  StepCollectives& comm() const { return comm_; }  // the ranks' collectives (the host optimizer's norm, its waits)
  // this rank's gradient part of tensor i = the sum over ranks of their full gradients' part (zero.reduce_scatter)
  void reduce(std::size_t i, const void* full_grad, cudaStream_t stream);
  // the optimizer's tensors: each parameter part (params on the host: a pinned host pointer) with its gradient part
  std::vector<ParamRef> parts() const;
  std::vector<double> param_part(std::size_t i) const;  // downloads (synchronous)
  std::vector<double> grad_part(std::size_t i) const;

 private:
  StepCollectives& comm_;
  int P_, r_;
  std::vector<ShardedTensor> t_;
  bool on_host_ = false;
  std::int64_t host_bytes_ = 0;
  std::vector<PinnedPtr> host_parts_;  // params on the host: the parts' allocations
  std::vector<bf16_t*> param_;
  std::vector<void*> grad_;
};

}  // namespace ulysses::runtime::cuda
