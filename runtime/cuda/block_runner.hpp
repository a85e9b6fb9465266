#pragma once
// One rank's Ulysses attention block on the GPU: its buffers and its six phases.
//   a2a.qkv.fwd  q_seq [B,S_l,H,D] -> q_head [B,S,H_l,D]; k, v [B,S_l,H_kv,D] -> [B,S,H_kv_l,D]
//                (P > H_kv: replicate -> k_rep [B,S_l,P,D] first, or send_once straight from k_seq);
//                q, k and v travel in one NCCL group
//   attn.fwd     o_head [B,S,H_l,D] bf16, lse [B,H_l,S] fp32
//   a2a.out.fwd  o_head -> o_seq [B,S_l,H,D]
//   a2a.out.bwd  dout_seq -> dout_head
//   attn.bwd     dq_head, dk_head, dv_head
//   a2a.qkv.bwd  dq_head -> dq_seq; dk, dv -> dk_seq, dv_seq (P > H_kv: the R replica gradients
//                summed in fp32, ascending peer, rounded once; dq, dk, dv in one group)
// Every buffer is allocated once, up front, from the rank's DeviceArena (so the peak is the sum
// of all of them: nothing is freed inside an iteration).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/attention.hpp"
#include "runtime/backend.hpp"
#include "runtime/cuda/cluster.hpp"
#include "runtime/cuda/device_memory.hpp"
#include "runtime/cuda/exchange.hpp"
#include "runtime/verify.hpp"

namespace ulysses::runtime::cuda {

// The kernel of an attn_implementation, from the table core/attn_impls.hpp: ulysses_flash / flash:
// the flash kernel; ulysses_reference / reference / eager: the reference kernel; "" and the PyTorch
// names (flash_attention_2, flash_attention_3, sdpa, flex_attention): flash, falling back to
// reference when flash refuses the shape or is not built. Throws std::invalid_argument otherwise.
struct KernelChoice {
  kernels::AttnKernel kind = kernels::AttnKernel::flash;
  bool fallback = true;
};
KernelChoice parse_kernel_choice(const std::string& attn_implementation);

class BlockRunner {
 public:
  BlockRunner(RankCtx& ctx, DeviceArena& arena, const BlockShape& s, KernelChoice kernel, int slices);

  void fill_inputs(std::uint64_t seed);
  void poison_outputs();                 // NaN bits (0xFFFF) in every output and intermediate
  void phase(int p);                     // enqueue phase p (BlockPhase order) on ctx.stream / ctx.comm_stream
  void barrier();                        // all ranks: a 1-element all-reduce; ctx.stream waits on it
  // Bit-exact exchange of q, k, v, dout against the seeded generator, no poison left in the
  // outputs, and head->seq(seq->head(q)) == q (this last one overwrites o_seq: download first).
  std::vector<Check> device_checks(std::uint64_t seed, bool keep_roundtrip);
  RankResult download();                 // host copies of the tensors of RankResult (runtime/verify.hpp)
  const std::vector<std::uint16_t>& roundtrip() const { return roundtrip_; }
  std::string kernel_name() const;
  void set_slices(int k) { slices_ = k; }
  Exchanger& exchanger() { return *ex_; }
  unsigned long long* counter() { return counter_.get(); }  // one device word for checks

 private:
  RankCtx& ctx_;
  BlockShape s_;
  KernelChoice kernel_;
  int slices_;
  core::Dims qx_, kvx_, kv_seq_dims_;
  bool rep_;
  std::int64_t S_l_, H_l_, H_kv_l_;
  DevBuf<std::uint16_t> q_seq_, k_seq_, v_seq_, dout_seq_, o_seq_, dq_seq_, dk_seq_, dv_seq_;
  DevBuf<std::uint16_t> k_rep_, v_rep_, dk_rep_, dv_rep_;
  DevBuf<std::uint16_t> q_head_, k_head_, v_head_, o_head_, dout_head_, dq_head_, dk_head_, dv_head_;
  DevBuf<float> lse_, barrier_;
  DevBuf<std::uint8_t> workspace_;
  DevBuf<unsigned long long> counter_;
  std::unique_ptr<Exchanger> ex_;
  std::vector<std::uint16_t> roundtrip_;

  void attention_fwd();
  void attention_bwd();
};

}  // namespace ulysses::runtime::cuda
