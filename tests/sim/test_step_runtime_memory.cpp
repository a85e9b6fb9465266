// Our runtime's step buffers (sim/step_runtime_memory.hpp) for one small shape, summed by hand from the
// runner's constructor (runtime/cuda/step_runner.cpp), and how the plan moves them. The GPU test
// (tests/gpu/test_step_runner.cpp) checks the arena's peak against the same function.
#include <catch2/catch.hpp>

#include "sim/step_runtime_memory.hpp"
#include "tests/sim/fixtures.hpp"

using namespace ulysses;

namespace {
Dims small_dims() {
  Dims d;
  d.B = 1, d.S = d.S_l = 512, d.h = 512, d.H = 4, d.H_kv = 2, d.D = 128, d.F = 1024, d.V = 1000, d.L = 2;
  d.ckpt = true, d.logits_shards = 1;
  return d;
}
StepRuntimeFlags flags(bool tied, bool flash, bool qk_norm = false) {
  StepRuntimeFlags f;
  f.tied = tied, f.flash = flash, f.qk_norm = qk_norm;
  return f;
}
}  // namespace

TEST_CASE("our runtime's step bytes, by hand for T=512 h=512 H=4/2 D=128 F=1024 V=1000 L=2", "[sim][step_runtime]") {
  const Dims d = small_dims();
  const StepRuntimeBytes b = ulysses_step_bytes(d, flags(false, true));
  // layer weights: q 512*512, k, v 256*512 each, o 512*512, gate/up/down 1024*512 each, two norms 512
  const std::int64_t layer = 262144 + 2 * 131072 + 262144 + 3 * 524288;  // 2359296 matrix elements
  CHECK(b.params == (2 * 1000 * 512 + 512 + 2 * (layer + 1024)) * 2);
  CHECK(b.grads == 1000 * 512 * 4 + 512 * 4 + 1000 * 512 * 2 + 2 * (layer * 2 + 1024 * 4));
  // AdamW: master, m, v fp32 per parameter; 128 partial sums for each of 3 + 2 * 9 tensors; norm and coefficient
  CHECK(b.optimizer == 3 * (2 * 1000 * 512 + 512 + 2 * (layer + 1024)) * 4 + 21 * 128 * 4 + 2 * 4);
  // one activation set: n1, h1, n2 [512,512]; q, o [512,512]; k, v [512,256]; g, u, act [512,1024]; r1, r2, lse
  const std::int64_t acts = (3 * 262144 + 2 * 262144 + 2 * 131072 + 3 * 524288) * 2 + (2 * 512 + 4 * 512) * 4;
  CHECK(b.kept == 2 * 512 * 4 + 2 * 512 * 64 * 2 + 3 * 262144 * 2 + acts);
  // dact, dg, du; dn, tmp_h, dh1; do, dq; dk, dv; rmsnorm's 264 row-block partials; flash: dq_accum + 2 rows
  CHECK(b.scratch == (3 * 524288 + 3 * 262144 + 2 * 262144 + 2 * 131072) * 2 + 264 * 512 * 4 + 512 * 512 * 4 + 2 * 4 * 512 * 4);
  CHECK(b.loss_head == 2 * 262144 * 2 + 512 * 4 + 512 * 1000 * 2 + 512 * 4 + 2 * 262144 * 2);
  CHECK(b.gemm_workspace == 32 << 20);
  CHECK(b.host_pinned == 0);
  CHECK(b.total() == b.params + b.grads + b.optimizer + b.kept + b.scratch + b.loss_head + b.gemm_workspace + b.staging);
}

TEST_CASE("our runtime's step bytes follow the plan", "[sim][step_runtime]") {
  Dims d = small_dims();
  const StepRuntimeBytes ck = ulysses_step_bytes(d, flags(false, true));
  d.ckpt = false;
  const StepRuntimeBytes all = ulysses_step_bytes(d, flags(false, true));
  CHECK(all.kept > ck.kept);  // every layer keeps its activations
  CHECK(all.params == ck.params);
  d.ckpt = true, d.logits_shards = 3;
  CHECK(ulysses_step_bytes(d, flags(false, true)).loss_head == ck.loss_head - (512 - 171) * 1000 * 2);  // chunks of ceil(512/3)
  d.logits_shards = 1;
  CHECK(ulysses_step_bytes(d, flags(true, true)).params == ck.params - 1000 * 512 * 2);  // tied: no lm_head
  CHECK(ulysses_step_bytes(d, flags(false, false)).scratch < ck.scratch);                // the reference kernel's delta only
  // Qwen3's head norms: weights and fp32 gradients [D] x2 per layer, q and k before the norms with their rstd,
  // their gradients and the norms' dw partials (264 rows of D)
  const StepRuntimeBytes qk = ulysses_step_bytes(d, flags(false, true, true));
  CHECK(qk.params == ck.params + 2 * 2 * 128 * 2);
  CHECK(qk.grads == ck.grads + 2 * 2 * 128 * 4);
  CHECK(qk.kept == ck.kept + (512 * 512 + 512 * 256) * 2 + (512 * 4 + 512 * 2) * 4);
  CHECK(qk.scratch == ck.scratch + (512 * 512 + 512 * 256) * 2 + 264 * 128 * 4);
}

TEST_CASE("our runtime's step bytes: TiledMLP, checkpoint offload, no optimizer", "[sim][step_runtime]") {
  Dims d = small_dims();
  const StepRuntimeBytes base = ulysses_step_bytes(d, flags(false, true));
  // TiledMLP over 3 shards of ceil(512 / 3) = 171 rows: the activation set keeps no gate, up, act [512, 1024];
  // the scratch holds one shard's gate, up, act and the backward's dact, dg, du at 171 rows
  d.mlp_shards = 3;
  const StepRuntimeBytes tm = ulysses_step_bytes(d, flags(false, true));
  CHECK(tm.kept == base.kept - 3 * 512 * 1024 * 2);
  CHECK(tm.scratch == base.scratch - 3 * 512 * 1024 * 2 + 6 * 171 * 1024 * 2);
  CHECK(tm.params == base.params);
  d.mlp_shards = 1;
  // checkpoint offload: two hidden states on the device instead of L + 1 = 3; layer 0's input on the host
  StepRuntimeFlags off = flags(false, true);
  off.offload_checkpoints = true;
  const StepRuntimeBytes ck = ulysses_step_bytes(d, off);
  CHECK(ck.kept == base.kept - 512 * 512 * 2);
  CHECK(ck.host_pinned == 512 * 512 * 2);
  CHECK(ck.total() == base.total() - 512 * 512 * 2);  // pinned host memory is not the device's
  StepRuntimeFlags no_opt = flags(false, true);
  no_opt.optimizer = false;
  CHECK(ulysses_step_bytes(d, no_opt).optimizer == 0);
  CHECK(ulysses_step_bytes(d, no_opt).total() == base.total() - base.optimizer);
}

TEST_CASE("our runtime's longest step: the sum fits at the answer, not one granule on, a ballast shortens it", "[sim][step_runtime]") {
  Scenario sc = test::make_scenario(test::llama31_8b(), test::h200_sxm(), 1, 1, 8192);
  sc.model.layers = 2;
  sc.plan.runtime = Runtime::ulysses;
  const std::int64_t g = 4096;
  const core::bytes_t room = sc.hw.hbm_bytes - process_context_bytes(sc);
  auto bytes_at = [&](std::int64_t S, const Scenario& base) {
    Scenario x = base;
    x.plan.seq_len = S;
    return ulysses_step_bytes(derive_dims(x), step_runtime_flags(x)).total();
  };
  const StepRuntimeCapacity c = ulysses_step_capacity(sc, g);
  REQUIRE(c.max_seq_len > 0);
  CHECK(c.max_seq_len % g == 0);
  CHECK(c.binding == Binding::gpu_hbm);
  CHECK(c.device_bytes == bytes_at(c.max_seq_len, sc));
  CHECK(bytes_at(c.max_seq_len, sc) <= room);
  CHECK(bytes_at(c.max_seq_len + g, sc) > room);
  const core::bytes_t ballast = core::bytes_t{64} << 30;
  const StepRuntimeCapacity b = ulysses_step_capacity(sc, g, ballast);
  CHECK(b.max_seq_len < c.max_seq_len);
  CHECK(bytes_at(b.max_seq_len, sc) <= room - ballast);
  CHECK(bytes_at(b.max_seq_len + g, sc) > room - ballast);
  // TiledMLP and tiled logits: longer
  sc.plan.tiled_mlp = sc.plan.tiled_logits = true;
  CHECK(ulysses_step_capacity(sc, g).max_seq_len > c.max_seq_len);
  // nothing fits: 0, and what binds
  const StepRuntimeCapacity none = ulysses_step_capacity(sc, g, sc.hw.hbm_bytes);
  CHECK(none.max_seq_len == 0);
  CHECK(none.binding == Binding::gpu_hbm);
  // the host binds only with an offload: the host optimizer's 12 bytes per parameter in a small host
  sc.host_ram_bytes = core::bytes_t{8} << 30;
  sc.plan.offload_optimizer = false;  // (the fixture's recipe offloads it)
  CHECK(ulysses_step_capacity(sc, g).binding == Binding::gpu_hbm);  // nothing on the host yet
  sc.plan.offload_optimizer = true;
  const StepRuntimeCapacity host = ulysses_step_capacity(sc, g);
  CHECK(host.max_seq_len == 0);
  CHECK(host.binding == Binding::host_ram);
}

TEST_CASE("our runtime's step bytes: the optimizer on the host", "[sim][step_runtime]") {
  Dims d = small_dims();
  const StepRuntimeBytes dev = ulysses_step_bytes(d, flags(false, true));
  StepRuntimeFlags off = flags(false, true);
  off.offload_optimizer = true;
  const StepRuntimeBytes host = ulysses_step_bytes(d, off);
  CHECK(host.optimizer == 0);  // no master weights or moments on the device
  CHECK(host.total() == dev.total() - dev.optimizer);
  // pinned staging: each gradient as the step holds it and a bf16 copy of each parameter; the embedding's
  // and the norms' gradients are fp32 (1000 * 512 + 512 + 2 * 1024 of them), the rest bf16
  const std::int64_t params = host.params / 2, fp32 = 1000 * 512 + 512 + 2 * 1024;
  CHECK(host.host_pinned == (params - fp32) * 4 + fp32 * 6);
  CHECK(host.host_state == 12 * params);
  // offload_params on one rank (ZeRO-3's machinery over OneRank): no parameters on the device but the outer tensors
  // and two layer slots; the gradients as without it (each full gradient is its own part); no norm's exchange (one
  // rank); the same staging and state on the host (4 layers: two slots are not every layer)
  Dims d4 = d;
  d4.L = 4;
  const StepRuntimeBytes h4 = ulysses_step_bytes(d4, off);
  StepRuntimeFlags par = off;
  par.offload_params = true;
  const StepRuntimeBytes p1 = ulysses_step_bytes(d4, par);
  const std::int64_t layer = 2359296 + 1024, outer = 2 * 1000 * 512 + 512;
  CHECK(h4.params == (outer + 4 * layer) * 2);
  CHECK(p1.params == (outer + 2 * layer) * 2);
  CHECK(p1.grads == h4.grads);
  CHECK(p1.optimizer == 0);
  CHECK(p1.host_pinned == h4.host_pinned);
  CHECK(p1.host_state == h4.host_state);
  CHECK(p1.kept == h4.kept);
}

TEST_CASE("our runtime's step bytes at sp 2 and 4: the head-sharded tensors", "[sim][step_runtime]") {
  // One rank of sp = P holds T = 512 / P tokens; its attention runs on H / P heads over all 512 positions: q, o
  // [512, H_l, 128] and k, v [512, K_l, 128] kept (and refilled by the recompute), their gradients in the scratch,
  // the flash backward's workspace over [512, H_l]; everything else as one rank of T tokens.
  Dims one = small_dims();
  one.S_l = 256;  // the same tokens per rank without the exchange
  const StepRuntimeBytes base = ulysses_step_bytes(one, flags(false, true));
  Dims d = small_dims();
  d.S = 512, d.S_l = 256, d.P = 2, d.H_l = 2, d.kv_local = 1;
  const StepRuntimeBytes sp = ulysses_step_bytes(d, flags(false, true));
  const std::int64_t heads = (2 * 512 * 2 + 2 * 512 * 1) * 128 * 2;  // qh, oh; kh, vh
  CHECK(sp.kept == base.kept + heads);  // one activation set (checkpointing)
  // T = 256, H = 4: dq_accum 256*512 fp32 + 2 rows of 4*256; at sp 2: 512*256 fp32 + 2 rows of 2*512 (the same)
  CHECK(sp.scratch == base.scratch + heads);
  CHECK(sp.loss_head == base.loss_head);
  // ZeRO-3 over the 2 ranks: half of every parameter (5745152 in all), the embedding, final norm and lm_head whole,
  // two gathered layers (2359296 matrix elements + 2 norms of 512 each); the gradients' halves (12519424 bytes in
  // their types), the outer ones whole (embedding fp32, final norm fp32, lm_head bf16), one layer's
  const std::int64_t layer = 2359296, n_params = 2 * 1000 * 512 + 512 + 2 * (layer + 1024);
  CHECK(n_params == 5745152);
  CHECK(sp.params == (n_params / 2 + 2 * 1000 * 512 + 512 + 2 * (layer + 1024)) * 2);
  CHECK(sp.grads == 12519424 / 2 + 1000 * 512 * 4 + 512 * 4 + 1000 * 512 * 2 + layer * 2 + 1024 * 4);
  CHECK(base.grads == 12519424);  // one rank: every gradient in its type
  // AdamW on the parts, its own 21 tensors' partial sums and every rank's
  CHECK(sp.optimizer == 3 * (n_params / 2) * 4 + 21 * 128 * 4 + 2 * 4 + 2 * 21 * 128 * 4);
  // over GPUs the exchange's NCCL send and receive buffers: 2 chunks of q (4 heads) and of k and v (2 kv heads) per
  // rank, 256 rows of 128 each; logical ranks of one GPU have none
  CHECK(sp.staging == 0);
  StepRuntimeFlags over_gpus = flags(false, true);
  over_gpus.transport_staging = true;
  CHECK(ulysses_step_bytes(d, over_gpus).staging == 2 * 256 * 128 * (4 + 2 * 2) * 2);
  CHECK(ulysses_step_bytes(d, over_gpus).total() == sp.total() + 2 * 256 * 128 * (4 + 2 * 2) * 2);
  CHECK(ulysses_step_bytes(one, over_gpus).staging == 0);  // one rank: no exchange
  // the optimizer on the host over the rank's parts: half of the pinned staging and of the state of one rank of
  // the whole model, and the norm's exchange: [1 + 2] fp64 on the device, [2] pinned
  StepRuntimeFlags host = flags(false, true);
  host.offload_optimizer = true;
  const std::int64_t fp32 = 1000 * 512 + 512 + 2 * 1024;  // the embedding's and the norms' gradients
  const StepRuntimeBytes sp_host = ulysses_step_bytes(d, host);
  CHECK(sp_host.optimizer == 3 * 8);
  CHECK(sp_host.host_pinned == ((n_params - fp32) * 4 + fp32 * 6) / 2 + 2 * 8);
  CHECK(sp_host.host_state == 12 * n_params / 2);
  CHECK(sp_host.total() == sp.total() - sp.optimizer + 3 * 8);
  // offload_params: the parameter parts are that pinned staging's bf16 buffers, not on the device
  host.offload_params = true;
  const StepRuntimeBytes sp_off = ulysses_step_bytes(d, host);
  CHECK(sp_off.params == sp_host.params - n_params / 2 * 2);
  CHECK(sp_off.host_pinned == sp_host.host_pinned);
  CHECK(sp_off.host_state == sp_host.host_state);
  // P = 4 > H_kv = 2: one replicated kv head per rank
  d.S_l = 128, d.P = 4, d.H_l = 1, d.kv_local = 1;
  one.S_l = 128;
  const std::int64_t heads4 = (2 * 512 * 1 + 2 * 512 * 1) * 128 * 2;
  CHECK(ulysses_step_bytes(d, flags(false, true)).kept == ulysses_step_bytes(one, flags(false, true)).kept + heads4);
  d.ckpt = one.ckpt = false;  // without checkpointing every layer keeps its own head-sharded tensors
  CHECK(ulysses_step_bytes(d, flags(false, true)).kept == ulysses_step_bytes(one, flags(false, true)).kept + 2 * heads4);
}
