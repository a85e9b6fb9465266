// The live buffers of runtime/cpu/cpu_backend.cpp's iteration(), phase by phase (bytes per rank):
//   q    = B*S_l*H*D*2        q/o/dout/dq in either layout (S*H_l = S_l*H)
//   kvs  = B*S_l*H_kv*D*2     k or v (or dk, dv) sequence-sharded
//   kw   = B*S_l*max(H_kv,P)*D*2   k or v on the wire and head-sharded (replicas count)
//   rep  = B*S_l*P*D*2        the kv replica (kv_strategy replicate, P > H_kv), else 0
//   lse  = B*S_l*H*4          attention statistics [B, H_l, S] fp32
//   ex   = 1 when B > 1: the side of an exchange that is not the identity needs a buffer
//   base = q + 2*kvs          the inputs q_seq, k_seq, v_seq, live for the whole iteration
// a2a.qkv.fwd: base + 2rep + (send q + 2kw) + ex*(recv q + 2kw) + (q_head q + k/v_head 2kw)
// attn.fwd:    base + q_head, k/v_head + o_head q + lse
// a2a.out.fwd: base + q + 2kw + q + lse + ex*send q + recv q + o_seq q
// a2a.out.bwd: base + q + 2kw + q + lse + o_seq q + dout_seq q + send q + ex*recv q + dout_head q
// attn.bwd:    base + q + 2kw + q + lse + q + q + q + dq_head q + dk/dv_head 2kw
// a2a.qkv.bwd: base + o_seq q + dout_seq q + d{q,k,v}_head (q + 2kw) + ex*send (q + 2kw)
//              + recv (q + 2kw) + 2rep + dq_seq q + dk/dv_seq 2kvs
// (The fp32 widened copies inside attention and the send_once fp32 sums stand for a fused
// kernel's registers and are not charged, as in the backend.)
#include "sim/block_memory.hpp"

#include <algorithm>

namespace ulysses {

core::bytes_t block_peak_bytes_freeing(const Dims& d) {
  const core::bytes_t tok = d.B * d.S_l;
  const core::bytes_t q = tok * d.H * d.D * 2, kvs = tok * d.H_kv * d.D * 2, kw = tok * d.kv_wire * d.D * 2;
  const core::bytes_t rep = d.kv_replica ? tok * d.P * d.D * 2 : 0, lse = tok * d.H * 4;
  const core::bytes_t ex = d.B > 1 ? 1 : 0, base = q + 2 * kvs;
  const core::bytes_t phase[6] = {
      base + 2 * rep + (q + 2 * kw) + ex * (q + 2 * kw) + (q + 2 * kw),  // a2a.qkv.fwd
      base + (q + 2 * kw) + q + lse,                                     // attn.fwd
      base + (q + 2 * kw) + q + lse + ex * q + q + q,                    // a2a.out.fwd
      base + (q + 2 * kw) + q + lse + q + q + q + ex * q + q,            // a2a.out.bwd
      base + (q + 2 * kw) + q + lse + 3 * q + (q + 2 * kw),              // attn.bwd
      base + 2 * q + (q + 2 * kw) + ex * (q + 2 * kw) + (q + 2 * kw) + 2 * rep + q + 2 * kvs,  // a2a.qkv.bwd
  };
  return *std::max_element(phase, phase + 6);
}

}  // namespace ulysses
