// Memory model: golden numbers (arithmetic in the comments), breakdown invariants,
// monotonicity. Scenarios are built in C++ from tests/sim/fixtures.hpp.
#include <catch2/catch.hpp>
#include <cstring>
#include <set>
#include <string>

#include "sim/config.hpp"
#include "core/errors.hpp"
#include "sim/memory.hpp"
#include "sim/predict.hpp"
#include "tests/sim/fixtures.hpp"

using namespace ulysses;
using test::h100_sxm;
using test::llama31_8b;
using test::make_scenario;

namespace {

core::bytes_t sum_terms(const MemoryBreakdown& m) {
  core::bytes_t s = 0;
  for (int i = 0; i < m.n; ++i) s += m.terms[i].bytes;
  return s;
}

}  // namespace

TEST_CASE("memory: Llama-3.1-8B parameter count matches the model card", "[sim][memory]") {
  // L*(attn 41943040 + mlp 176160768 + norms 8192) + 2 * 128256*4096 + 4096 = 8030261248
  CHECK(total_params(llama31_8b()) == 8030261248);
  CHECK(total_params(test::llama31_70b()) == 70553706496);
}

TEST_CASE("memory: checkpoints of Llama-3.1-8B at S=128K, P=8", "[sim][memory][golden]") {
  Scenario sc = make_scenario(llama31_8b(), h100_sxm(), 8, 8, 131072);
  const Prediction p = predict(sc);
  CHECK(p.s_local == 16384);
  // L * B * S_l * h * 2 = 32 * 16384 * 4096 * 2 = 4294967296 bytes (4 GiB)
  CHECK(p.gpu.get("checkpoints") == 4294967296);
  CHECK(p.host.get("checkpoints") == 0);

  sc.plan.offload_checkpoints = true;
  const Prediction o = predict(sc);
  CHECK(o.gpu.get("checkpoints") == 0);
  // per node: 8 GPUs * 4294967296 = 34359738368
  CHECK(o.host.get("checkpoints") == 34359738368);
  CHECK(o.gpu.total() < p.gpu.total());
}

TEST_CASE("memory: model states under ZeRO-3 over 8 ranks", "[sim][memory][golden]") {
  Scenario sc = make_scenario(llama31_8b(), h100_sxm(), 8, 8, 65536);
  sc.plan.offload_optimizer = false;
  // shard = ceil(8030261248 / 8) = 1003782656 params
  Prediction p = predict(sc);
  CHECK(p.gpu.get("weights") == 2 * 1003782656LL);            // bf16
  CHECK(p.gpu.get("grads") == 2 * 1003782656LL);              // bf16 gradient partitions (ZeRO-3)
  CHECK(p.gpu.get("optimizer_states") == 12 * 1003782656LL);  // fp32 master + m + v
  CHECK(p.host.get("optimizer_states") == 0);

  sc.plan.offload_optimizer = true;  // master, moments, fp32 grads to host; bf16 shard stays
  p = predict(sc);
  CHECK(p.gpu.get("weights") == 2 * 1003782656LL);
  CHECK(p.gpu.get("grads") == 0);
  CHECK(p.gpu.get("optimizer_states") == 0);
  CHECK(p.host.get("optimizer_states") == 8 * 12 * 1003782656LL);  // 8 GPUs on the node
  CHECK(p.host.get("grads") == 8 * 4 * 1003782656LL);

  sc.plan.offload_params = true;
  p = predict(sc);
  CHECK(p.gpu.get("weights") == 0);
  CHECK(p.host.get("params") == 8 * 2 * 1003782656LL);
}

TEST_CASE("memory: ZeRO stages shard progressively, dp_replicate replicates", "[sim][memory]") {
  Scenario sc = make_scenario(llama31_8b(), h100_sxm(), 8, 8, 65536);
  sc.plan.offload_optimizer = false;
  const std::int64_t Pn = 8030261248, shard = 1003782656;
  sc.plan.zero_stage = 0;
  Prediction p = predict(sc);
  CHECK(p.gpu.get("weights") + p.gpu.get("grads") + p.gpu.get("optimizer_states") == 18 * Pn);
  CHECK(p.gpu.get("zero3_gathered_params") == 0);
  sc.plan.zero_stage = 1;
  p = predict(sc);
  CHECK(p.gpu.get("optimizer_states") == 12 * shard);
  CHECK(p.gpu.get("grads") == 4 * Pn);
  sc.plan.zero_stage = 2;
  p = predict(sc);
  CHECK(p.gpu.get("grads") == 4 * shard);
  CHECK(p.gpu.get("weights") == 2 * Pn);
  // 16 GPUs as 2 replicas x 8 (sp 8): each rank still holds a 1/8 shard
  Scenario r = make_scenario(llama31_8b(), h100_sxm(), 16, 8, 65536);
  r.plan.offload_optimizer = false;
  r.plan.dp_shard_size = 1;
  r.plan.dp_replicate_size = 2;
  CHECK(predict(r).gpu.get("weights") == 2 * shard);
}

TEST_CASE("memory: exchange bytes of q and kv, GQA replication", "[sim][memory][golden]") {
  Scenario sc = make_scenario(llama31_8b(), h100_sxm(), 8, 8, 131072);
  Prediction p = predict(sc);
  // q: B*S_l*H*D*2 = 16384*32*128*2 = 134217728 (128 MiB)
  CHECK(p.a2a_q_bytes_per_rank == 134217728);
  // k and v: 2 * 16384*8*128*2 = 67108864
  CHECK(p.a2a_kv_bytes_per_rank == 67108864);

  // P = 32 > H_kv = 8: every kv head travels as 4 replicas -> max(H_kv, P) = 32 heads
  Scenario r = make_scenario(llama31_8b(), h100_sxm(), 32, 32, 131072);
  Prediction pr = predict(r);
  CHECK(pr.s_local == 4096);
  CHECK(pr.a2a_kv_bytes_per_rank == 2LL * 4096 * 32 * 128 * 2);  // 67108864
  // send_once: same bytes on the wire, no [B, S_l, P, D] replica (k, v and their grads)
  r.plan.kv_strategy = KvStrategy::send_once;
  Prediction ps = predict(r);
  CHECK(ps.a2a_kv_bytes_per_rank == pr.a2a_kv_bytes_per_rank);
  CHECK(pr.block_peak_bytes - ps.block_peak_bytes == 4LL * 4096 * 32 * 128 * 2);
}

TEST_CASE("memory: padding to lcm(pad_to_multiple_of, P)", "[sim][memory]") {
  Scenario sc = make_scenario(llama31_8b(), h100_sxm(), 8, 8, 100000);
  sc.plan.pad_to_multiple_of = 64;  // lcm(64, 8) = 64: ceil(100000/64)*64 = 100032
  Prediction p = predict(sc);
  CHECK(p.seq_len == 100000);
  CHECK(p.padded_seq_len == 100032);
  CHECK(p.s_local == 12504);
  CHECK(padded_seq_len(100, 6, 4) == 108);  // lcm(6, 4) = 12: ceil(100/12)*12
  CHECK(padded_seq_len(100, 0, 4) == 100);  // no padding requested
}

TEST_CASE("memory: logits and loss, untiled and tiled", "[sim][memory][golden]") {
  Scenario sc = make_scenario(llama31_8b(), h100_sxm(), 8, 1, 32768);
  Dims d = derive_dims(sc);
  // untiled, eager RMSNorm (default): 12 * B*S_l*V + 5 * B*S_l*h*2 (loss backward: saved
  // log_softmax out 4 + nll grad 4 + log_softmax grad 4 B/logit; final norm fp32 input 2 th + bf16
  // normalized th + output th + grad of hidden th)
  //        = 12 * 32768*128256 + 5 * 32768*4096*2 = 50432311296 + 1342177280
  CHECK(logits_loss_bytes(d) == 51774488576);
  const Prediction p = predict(sc);
  CHECK(std::string(p.gpu_peak_at) == "logits_loss");  // untiled logits dominate at 32K
  CHECK(p.gpu.get("logits_loss") == 51774488576);
  // fused RMSNorm: the norm keeps its bf16 input: 3 th = 805306368
  sc.plan.rmsnorm_implementation = RmsNormImpl::fused;
  CHECK(logits_loss_bytes(derive_dims(sc)) == 50432311296 + 805306368);
  sc.plan.rmsnorm_implementation = RmsNormImpl::eager;

  sc.plan.tiled_logits = true;
  d = derive_dims(sc);
  // shards = ceil(32768*128256*4 / 2^30) = ceil(15.66) = 16; 2048 tokens per shard
  CHECK(d.logits_shards == 16);
  CHECK(logits_loss_bytes(d) == 12LL * 2048 * 128256 + 1342177280);
  CHECK(predict(sc).gpu.total() < p.gpu.total());
}

TEST_CASE("memory: TiledMLP shard count and effect", "[sim][memory]") {
  Scenario sc = make_scenario(llama31_8b(), h100_sxm(), 8, 8, 524288);
  sc.plan.tiled_logits = true;
  const Prediction base = predict(sc);
  CHECK(std::string(base.gpu_peak_at) == "backward.mlp");
  // untiled MLP at its backward peak: 6 [B, S_l, F] bf16 = 6 * 65536*14336*2
  CHECK(base.gpu.get("layer.mlp") == 6LL * 65536 * 14336 * 2);
  sc.plan.tiled_mlp = true;
  CHECK(derive_dims(sc).mlp_shards == 16);  // ceil(65536 / 4096)
  const Prediction t = predict(sc);
  CHECK(t.gpu.total() < base.gpu.total());
  CHECK(t.gpu.get("layer.mlp") <= 6LL * 4096 * 14336 * 2);  // one shard's worth at most
  // at short S the logits tile (plus the gathered lm_head) is the peak instead
  sc.plan.seq_len = 131072;
  CHECK(std::string(predict(sc).gpu_peak_at) == "logits_loss");
}

TEST_CASE("memory: breakdowns sum to their totals, names unique and stable", "[sim][memory]") {
  for (int sp : {1, 2, 8}) {
    for (bool ckpt : {true, false}) {
      for (bool tiled : {false, true}) {
        Scenario sc = make_scenario(llama31_8b(), h100_sxm(), 8, sp, 65536);
        sc.plan.activation_checkpointing = ckpt;
        sc.plan.tiled_logits = tiled;
        sc.plan.tiled_mlp = tiled;
        const Prediction p = predict(sc);
        CHECK(sum_terms(p.gpu) == p.gpu.total());
        CHECK(sum_terms(p.host) == p.host.total());
        std::set<std::string> names;
        for (int i = 0; i < p.gpu.n; ++i) {
          CHECK(p.gpu.terms[i].bytes >= 0);
          names.insert(p.gpu.terms[i].name);
        }
        CHECK(static_cast<int>(names.size()) == p.gpu.n);
        CHECK(p.gpu.n == 21);  // every term always listed (0 when not live at the peak)
        CHECK(p.fits_gpu == (p.gpu.total() <= p.gpu_capacity_bytes));
      }
    }
  }
}

TEST_CASE("memory: GPU memory grows with S", "[sim][memory][monotone]") {
  for (int features = 0; features < 2; ++features) {
    Scenario sc = make_scenario(llama31_8b(), h100_sxm(), 8, 8, 0);
    if (features) sc = test::all_features(sc);
    core::bytes_t prev = 0;
    for (std::int64_t S = 8192; S <= (std::int64_t{1} << 24); S *= 2) {
      sc.plan.seq_len = S;
      const core::bytes_t m = predict(sc).gpu.total();
      INFO("S = " << S << " features " << features);
      CHECK(m > prev);
      prev = m;
    }
  }
}

TEST_CASE("memory: GPU memory falls with sp at fixed GPU count", "[sim][memory][monotone]") {
  for (bool tiled : {false, true}) {
    core::bytes_t prev = INT64_MAX;
    for (int sp : {1, 2, 4, 8}) {
      Scenario sc = make_scenario(llama31_8b(), h100_sxm(), 8, sp, 65536);
      sc.plan.tiled_logits = tiled;
      const core::bytes_t m = predict(sc).gpu.total();
      INFO("sp = " << sp << " tiled " << tiled);
      CHECK(m < prev);
      prev = m;
    }
  }
}

TEST_CASE("memory: no checkpointing keeps every layer's activations", "[sim][memory]") {
  Scenario sc = make_scenario(llama31_8b(), h100_sxm(), 8, 8, 65536);
  sc.plan.tiled_logits = true;
  const Prediction on = predict(sc);
  sc.plan.activation_checkpointing = false;
  const Prediction off = predict(sc);
  CHECK(off.gpu.get("checkpoints") == 0);
  CHECK(off.gpu.get("saved_activations") > 0);
  // each layer saves more than its checkpoint (the layer input alone)
  CHECK(off.gpu.get("saved_activations") > 31 * (on.gpu.get("checkpoints") / 32));
  CHECK(off.gpu.total() > on.gpu.total());
}

TEST_CASE("memory: SP gradient reduction buffers and fixed costs", "[sim][memory]") {
  Scenario sc = make_scenario(llama31_8b(), h100_sxm(), 8, 8, 65536);
  // sp > 1: one fp32 bucket of reduce_bucket_size 5e8 elements (DeepSpeed's seq-parallel communication dtype,
  // stage3.py 782): 5e8 * 4 = 2e9, at a moment without a flush (the flushes' epilogues: test_reduce_flush.cpp)
  const Prediction at_16k = predict(sc);
  CHECK(std::string(at_16k.gpu_peak_at).find("+reduce") == std::string::npos);
  CHECK(at_16k.gpu.get("grad_reduce_buffers") == 2000000000LL);
  sc.plan.sp_size = 1;
  sc.plan.dp_shard_size = 8;
  CHECK(predict(sc).gpu.get("grad_reduce_buffers") == 1000000000LL);  // one bf16 bucket
  CHECK(predict(sc).gpu.get("cuda_context") == (1LL << 30));
  CHECK(predict(sc).gpu.get("nccl_buffers") == (1LL << 30));

  // calibrated fixed costs override the profile when > 0, those of the plan's runtime only
  sc.hw.has_calibration = true;
  sc.hw.calibrated.cuda_context_bytes = 600000000;  // our CUDA runtime's
  sc.hw.calibrated.nccl_buffer_bytes = -1;
  CHECK(sc.plan.runtime == Runtime::pytorch);  // the default: the stack users run
  CHECK(predict(sc).gpu.get("cuda_context") == (1LL << 30));  // PyTorch's not calibrated: the profile's
  sc.hw.calibrated.pytorch_context_bytes = 1385000000;
  sc.hw.calibrated.pytorch_nccl_buffer_bytes = 700000000;
  CHECK(predict(sc).gpu.get("cuda_context") == 1385000000);
  CHECK(predict(sc).gpu.get("nccl_buffers") == 700000000);
  sc.plan.runtime = Runtime::ulysses;
  CHECK(predict(sc).gpu.get("cuda_context") == 600000000);
  CHECK(predict(sc).gpu.get("nccl_buffers") == (1LL << 30));

  Scenario one = make_scenario(llama31_8b(), h100_sxm(), 1, 1, 16384);
  CHECK(predict(one).gpu.get("nccl_buffers") == 0);  // no peers
}

TEST_CASE("memory: fragmentation is the stated fraction of the transient terms", "[sim][memory]") {
  Scenario sc = test::all_features(make_scenario(llama31_8b(), h100_sxm(), 8, 8, 262144));
  // PyTorch with expandable segments (the default): the granule slack, whatever the activations
  CHECK(predict(sc).gpu.get("fragmentation") == kExpandableGranuleSlackBytes);
  sc.plan.seq_len *= 2;
  CHECK(predict(sc).gpu.get("fragmentation") == kExpandableGranuleSlackBytes);
  sc.plan.seq_len /= 2;
  // without them (or on our runtime): the stated fraction
  sc.plan.expandable_segments = false;
  const Prediction p = predict(sc);
  core::bytes_t transient = 0;
  for (int i = 0; i < p.gpu.n; ++i) {
    const std::string n = p.gpu.terms[i].name;
    if (n.rfind("layer.", 0) == 0 || n == "logits_loss" || n == "checkpoints" || n == "saved_activations" ||
        n == "zero3_gathered_params")
      transient += p.gpu.terms[i].bytes;
  }
  // a bucket flush's epilogue, when the peak is at one, is in grad_reduce_buffers beyond the static fp32 bucket
  transient += p.gpu.get("grad_reduce_buffers") - static_cast<core::bytes_t>(4 * sc.plan.reduce_bucket_size);
  CHECK(p.gpu.get("fragmentation") == Approx(kFragmentationFraction * transient).margin(32));
  sc.plan.expandable_segments = true;
  sc.plan.runtime = Runtime::ulysses;
  CHECK(predict(sc).gpu.get("fragmentation") == Approx(p.gpu.get("fragmentation")).margin(32));
}

TEST_CASE("memory: host capacity and GPUs per node from the scenario", "[sim][memory]") {
  Scenario sc = test::all_features(make_scenario(llama31_8b(), h100_sxm(), 16, 16, 262144));
  Prediction p = predict(sc);
  CHECK(p.host_capacity_bytes == (2LL << 40));
  CHECK(p.gpu_capacity_bytes == 85899345920LL);
  // 16 GPUs, 8 per node: a node holds 8 processes' overhead
  CHECK(p.host.get("process_overhead") == 8 * kHostProcessOverheadBytes);
  sc.gpus_per_node = 4;
  sc.host_ram_bytes = 512LL << 30;
  p = predict(sc);
  CHECK(p.host.get("process_overhead") == 4 * kHostProcessOverheadBytes);
  CHECK(p.host_capacity_bytes == (512LL << 30));
}

TEST_CASE("memory: block peak counts the CUDA block runner's buffers", "[sim][memory][golden]") {
  // P=2, S=32K, H=32, H_kv=8, D=128, B=1: S_l = 16384, H_l = 16
  //   q = 16384*32*128*2 = 134217728; k, v (seq and head) = 16384*8*128*2 = 33554432
  //   sequence layout: q, o, dout, dq + k, v, dk, dv = 4*134217728 + 4*33554432 = 671088640
  //   head layout: the same sizes                                             = 671088640
  //   lse [B, H_l, S] fp32 = 16*32768*4                                       = 2097152
  //   flash workspace: dq_accum 16384*32*128*4 + 2 * (16*32768*4) (lse2, delta) = 272629760
  //   exchanger send + recv for q, k, v together: 2 * (134217728 + 2*33554432) = 402653184
  //   barrier + counter                                                       = 12
  //   total = 671088640*2 + 2097152 + 272629760 + 402653184 + 12 = 2019557388
  Scenario sc = make_scenario(llama31_8b(), h100_sxm(), 2, 2, 32768);
  CHECK(predict(sc).block_peak_bytes == 2019557388LL);
  // the reference kernel's workspace is delta only (= lse size), under each of its names
  for (const char* ref : {"ulysses_reference", "reference", "eager"}) {
    sc.plan.attn_implementation = ref;
    CHECK(predict(sc).block_peak_bytes == 2019557388LL - 272629760 + 2097152);
  }
  // P = 1: no exchange buffers
  Scenario one = make_scenario(llama31_8b(), h100_sxm(), 1, 1, 16384);
  // q = 16384*32*128*2 = 134217728, k/v = 33554432; 8q + 8kv + lse 2097152 + ws (268435456 + 2*2097152) + 12
  CHECK(predict(one).block_peak_bytes == 8LL * 134217728 + 8LL * 33554432 + 2097152 + 268435456 + 4194304 + 12);
}

TEST_CASE("memory: the optimizer step on the GPU (ZeRO-3): fp32 sub-group gradient, foreach temporary", "[sim][memory][golden]") {
  // 2-layer Llama-3.1-8B shape on one GPU, tiled logits at 2K: activations are small, the step binds
  ModelSpec m = llama31_8b();
  m.layers = 2;
  Scenario sc = make_scenario(m, h100_sxm(), 1, 1, 2048);
  sc.plan.tiled_logits = true;
  sc.plan.offload_optimizer = false;
  const double Pn = double(derive_dims(sc).total_params);  // one rank: the shard is every parameter
  Prediction p = predict(sc);
  REQUIRE(std::string(p.gpu_peak_at) == "optimizer_step");
  // sub-group = min(shard, 1e9 + lm_head 525336576) = Pn here (1.49e9 < 1.53e9): FusedAdam 4 B/param
  // (logits moment: 12 B x 2048 x 128256 + 5 th + gathered lm_head, its grad and a layer = 5.8e9 < 5.9e9)
  CHECK(p.gpu.get("optimizer_step") == static_cast<core::bytes_t>(4 * Pn));
  CHECK(p.gpu.get("logits_loss") == 0);
  CHECK(p.gpu.get("zero3_gathered_params") == 0);
  CHECK(p.gpu.get("checkpoints") == 0);
  sc.plan.torch_adam = true;  // torch's foreach AdamW: + sqrt(exp_avg_sq), 4 B/param
  CHECK(predict(sc).gpu.get("optimizer_step") == static_cast<core::bytes_t>(8 * Pn));
  sc.plan.offload_optimizer = true;  // CPU Adam: nothing of the step on the GPU
  CHECK(predict(sc).gpu.get("optimizer_step") == 0);

  // Qwen3-8B cut to 3 layers: sub-groups close at >= 1e9 elements in parameter order. Embedding
  // 151936*4096 = 622329856; a layer 192946432 (q 16777216, k, v 4194304, o 16777216, q/k norm 128,
  // gate, up, down 50331648, two norms 4096): embedding + layer 1 = 815276288, then layer 2 up to its
  // down projection closes the first group at 1008214528; the rest (815288576) is smaller
  ModelSpec q = load_model("qwen3-8b");
  q.layers = 3;
  Scenario sq = make_scenario(q, h100_sxm(), 1, 1, 2048);
  sq.plan.tiled_logits = true;
  sq.plan.offload_optimizer = false;
  sq.plan.torch_adam = true;
  const Prediction pq = predict(sq);
  REQUIRE(std::string(pq.gpu_peak_at) == "optimizer_step");
  CHECK(pq.gpu.get("optimizer_step") == 8LL * 1008214528);
}

TEST_CASE("memory: eager vs fused RMSNorm, exact bytes", "[sim][memory][golden]") {
  // all ALST features on 8 GPUs at S = 4194304: S_l = 524288, th = 524288*4096*2 = 4294967296
  Scenario sc = make_scenario(llama31_8b(), h100_sxm(), 8, 8, 4194304);
  sc.plan.tiled_logits = sc.plan.tiled_mlp = sc.plan.offload_checkpoints = true;
  const std::int64_t th = 4294967296;
  CHECK(sc.plan.rmsnorm_implementation == RmsNormImpl::eager);  // the HF default
  const Prediction e = predict(sc);
  sc.plan.rmsnorm_implementation = RmsNormImpl::fused;
  const Prediction f = predict(sc);
  REQUIRE(std::string(f.gpu_peak_at) == "backward.attn");
  // eager peaks inside norm2's backward (after the MLP backward): the attention's saved set, norm1's
  // output and both norms' eager sets (2 * 3 th), the residual gradient and norm2's incoming
  // gradient (2 th), and PowBackward0's transient (+8 th: five fp32 [T, h] tensors live while the
  // bf16 x_normed and the incoming gradient are freed)
  REQUIRE(std::string(e.gpu_peak_at) == "backward.norm");
  CHECK(e.gpu.get("layer.rmsnorm_eager") == 14 * th);
  // x_in (checkpoint copy) + the recomputed layer output the offload hook holds + norm1 out + both rstd
  CHECK(e.gpu.get("layer.norms_residuals") == 3 * th + 524288 * 8);
  CHECK(e.gpu.get("layer.grads_in_flight") == 2 * th);
  CHECK(e.gpu.get("layer.mlp") == 0);
  // fused: norm1 live during the attention backward, no eager copies: x_in + output held + norm1 out + rstd/2
  CHECK(f.gpu.get("layer.rmsnorm_eager") == 0);
  CHECK(f.gpu.get("layer.norms_residuals") == 3 * th + 524288 * 4);
  // the terms outside the layer's working set do not depend on the norm
  for (const char* name : {"weights", "grads", "optimizer_states", "zero3_gathered_params", "grad_reduce_buffers",
                           "checkpoints", "saved_activations", "logits_loss", "cuda_context", "nccl_buffers"}) {
    INFO(name);
    CHECK(e.gpu.get(name) == f.gpu.get(name));
  }
  CHECK(e.block_peak_bytes == f.block_peak_bytes);  // the attention block alone does not change

  // at S = 524288 (S_l 65536, th = 536870912) too: the norm backward (14 th of eager sets and
  // transient) is above the MLP backward (6 th of eager sets, norm2 out, 6 MLP shard intermediates)
  sc.plan.seq_len = 524288;
  sc.plan.rmsnorm_implementation = RmsNormImpl::eager;
  const Prediction em = predict(sc);
  REQUIRE(std::string(em.gpu_peak_at) == "backward.norm");
  CHECK(em.gpu.get("layer.rmsnorm_eager") == 14LL * 536870912);
  CHECK(em.gpu.get("layer.norms_residuals") == 3LL * 536870912 + 65536 * 8);
  // without checkpoint offload nothing holds the recomputed output
  sc.plan.offload_checkpoints = false;
  CHECK(predict(sc).gpu.get("layer.norms_residuals") == 536870912 /*norm1 out*/ + 65536 * 8);
  sc.plan.offload_checkpoints = true;
  sc.plan.rmsnorm_implementation = RmsNormImpl::fused;
  CHECK(predict(sc).gpu.total() < em.gpu.total());

  // no checkpointing: each other layer's saved set holds 2 * 3 th of eager norm copies instead
  // of the bf16 x and h1 (2 th): +4 th per layer; at S = 65536 on 8 GPUs th = 8192*4096*2
  Scenario n = make_scenario(llama31_8b(), h100_sxm(), 8, 8, 65536);
  n.plan.activation_checkpointing = false;
  n.plan.tiled_logits = true;
  const Prediction ne = predict(n);
  n.plan.rmsnorm_implementation = RmsNormImpl::fused;
  const Prediction nf = predict(n);
  const std::int64_t th2 = 67108864;
  REQUIRE(std::string(ne.gpu_peak_at) == std::string(nf.gpu_peak_at));
  const std::int64_t layers_saved = std::string(ne.gpu_peak_at) == "logits_loss" ? 32 : 31;
  CHECK(ne.gpu.get("saved_activations") - nf.gpu.get("saved_activations") == layers_saved * 4 * th2);
}

TEST_CASE("config: plan.rmsnorm_implementation set_key, to_yaml, bad value", "[config]") {
  Scenario sc = make_scenario(llama31_8b(), h100_sxm(), 8, 8, 65536);
  set_key(sc, "plan.rmsnorm_implementation", "fused", "--rmsnorm-implementation");
  CHECK(sc.plan.rmsnorm_implementation == RmsNormImpl::fused);
  CHECK(to_yaml(sc).find("  rmsnorm_implementation: fused\n") != std::string::npos);
  set_key(sc, "plan.rmsnorm_implementation", "eager", "--rmsnorm-implementation");
  CHECK(sc.plan.rmsnorm_implementation == RmsNormImpl::eager);
  CHECK(to_yaml(sc).find("  rmsnorm_implementation: eager\n") != std::string::npos);
  CHECK_THROWS_AS(set_key(sc, "plan.rmsnorm_implementation", "liger", "--rmsnorm-implementation"), core::InputError);
}
