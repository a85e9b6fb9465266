#pragma once
// The inputs of the cost model: model architecture, hardware profile, plan, workload.
// Loaded and validated from YAML by sim/config.hpp; built directly by tests and the CLI.
// Dimension letters (docs/DESIGN.md): B batch, S sequence, H query heads, H_kv kv heads,
// D head dim, P sp size, L layers, h hidden, F MLP width, V vocab.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/units.hpp"
#include "sim/eager.hpp"

namespace ulysses {

struct ModelSpec {
  std::string name;
  std::int64_t layers = 0;        // L
  std::int64_t hidden = 0;        // h
  std::int64_t heads = 0;         // H
  std::int64_t kv_heads = 0;      // H_kv
  std::int64_t head_dim = 0;      // D
  std::int64_t ffn_hidden = 0;    // F (SwiGLU: gate, up, down)
  std::int64_t vocab = 0;         // V
  bool tied_embeddings = false;
  bool qk_norm = false;           // Qwen3: RMSNorm on q and k per head
  bool qkv_bias = false;
  double rms_norm_eps = 0;        // HF rms_norm_eps; 0: not given (norm_eps_of, sim/model.hpp)
  double rope_theta = 0;          // HF rope_theta; 0: not given (rope_theta_of)
  std::int64_t published_params = 0;  // from the model card; 0 when unknown
  std::string source;                  // where the architecture numbers come from
  // not an input: what the loader read but the cost model does not represent (e.g. sliding-window
  // layers of a Hugging Face config.json); the CLI prints it on stderr. "" when none.
  std::string note;
};

// A piecewise curve y(x) sampled at points sorted by x. Interpolation: linear in log(x)
// between points, clamped to the end values outside the range (docs/MODEL.md).
struct Curve {
  std::vector<std::pair<double, double>> points;  // (x, y), strictly increasing x
  bool empty() const { return points.empty(); }
  double at(double x) const;                      // defined in sim/curve.cpp
};

// Measured by `ulysses calibrate`; every field optional (empty curve / value <= 0 = absent).
struct Calibration {
  std::string provenance;                // when, where, how (date, GPU, driver, CUDA, NCCL, command)
  // all-to-all bus bandwidth vs bytes per rank, one curve per sp size (x: bytes, y: GB/s)
  std::vector<std::pair<std::int64_t, Curve>> a2a_busbw_GBps;
  // NCCL all-gather / reduce-scatter of bf16 buffers per number of ranks P within a node (calib/cuda/collectives.hpp;
  // x: bytes of the whole buffer, y: nccl-tests' busbw GB/s): ZeRO-3's parameter gathers and gradient reductions
  std::vector<std::pair<std::int64_t, Curve>> allgather_busbw_GBps;
  std::vector<std::pair<std::int64_t, Curve>> reduce_scatter_busbw_GBps;
  double a2a_alpha_s = -1;               // fixed latency per all-to-all
  // attention efficiency (fraction of bf16 dense peak) vs S, per implementation,
  // separately forward/backward (x: S, y: efficiency)
  std::vector<std::pair<std::string, Curve>> attn_fwd_eff;
  std::vector<std::pair<std::string, Curve>> attn_bwd_eff;
  Curve gemm_eff;                        // x: M*N*K (flops/2), y: fraction of peak
  // our runtime's cuBLASLt GEMMs by pass and weight shape (sim/gemm_key.hpp keys; x: M, y: fraction of
  // peak); plan.runtime ulysses only, a shape without a curve falls back to gemm_eff
  std::vector<std::pair<std::string, Curve>> ulysses_gemm_eff;
  double host_link_h2d_GBps = -1;
  double host_link_d2h_GBps = -1;
  // the same while our GEMMs run on another stream (calib/cuda/host_link_busy.hpp): the rate of our runtime's
  // checkpoint copies, which overlap the layers' compute
  double host_link_h2d_busy_GBps = -1;
  double host_link_d2h_busy_GBps = -1;
  core::bytes_t cuda_context_bytes = -1;
  core::bytes_t nccl_buffer_bytes = -1;
  double pack_GBps = -1;                 // layout pack/unpack copy bandwidth (bytes moved r+w)
  // (added by issue 6's validation) fixed cost per tensor of an exchange (kernel launches, one
  // NCCL send/recv per peer and tensor): when >= 0 an exchange of n tensors costs n * this
  // instead of a2a_alpha_s
  double a2a_alpha_per_tensor_s = -1;
  // the block's own exchange phases measured as they run (sim/block_timing.cpp block_times): key
  // "<a2a.qkv.fwd|a2a.out.fwd|a2a.out.bwd|a2a.qkv.bwd>@p<P>", x: bytes per rank of the exchange
  // (all its tensors), y: effective GB/s = bytes / (t - tensors * a2a_alpha_per_tensor_s)
  std::vector<std::pair<std::string, Curve>> a2a_phase_GBps;
  // (added with the p2p exchange) the transport the exchange curves were measured with: "p2p" is
  // one kernel per exchange phase whatever its tensors (one alpha), "nccl" (or empty: older
  // profiles) one launch per tensor (tensors * alpha) - in both the curves and the model
  std::string a2a_transport;
  // (added with the p2p exchange) what an exchange phase costs on top of its curve when the GPU
  // computed for a while without NVLink traffic before it (links idle): x = that time in ms,
  // y = extra microseconds (>= 0). Applied to the exchanges that follow attention (sim/block_timing.cpp)
  Curve a2a_idle_penalty_us;
  // (added with the deepspeed backend) the PyTorch process's device memory outside its caching
  // allocator (CUDA context with torch's kernels, cuBLAS/cuDNN workspaces) and its NCCL buffers,
  // measured by `ulysses calibrate --backend deepspeed`; used when plan.runtime is pytorch
  core::bytes_t pytorch_context_bytes = -1;
  core::bytes_t pytorch_nccl_buffer_bytes = -1;
  // (added with the op bench of calibrate --backend deepspeed) the optimizer step per parameter:
  // torch.optim.AdamW on the GPU (plan.torch_adam) and DeepSpeedCPUAdam on the host (one process on
  // every core; optimizer offload), seconds per parameter; < 0: not measured (sim/timing.cpp)
  double torch_adamw_s_per_param = -1;
  double cpu_adam_s_per_param = -1;
  // (added with the op bench's eager rows) the HF decoder layer's elementwise passes, each measured
  // alone, as effective bytes per element at this profile's hbm_GBps, indexed by EagerRate
  // (sim/eager.hpp; profile keys calibrated.eager_bytes_per_elem.<op>.<pass>); < 0: not measured
  std::array<double, kEagerRates> eager_bytes_per_elem = eager_unmeasured();
  // (added with issue 13's step on our runtime) the same passes as our CUDA runtime's kernels run them
  // (plan.runtime ulysses: kernels/layer_ops.cu, kernels/loss_ops.cu), each timed alone by `calibrate
  // --backend cuda`, as effective bytes per element at hbm_GBps (profile keys
  // calibrated.ulysses_bytes_per_elem.<op>.<pass>); < 0: not measured (then each kernel's own traffic)
  std::array<double, kEagerRates> ulysses_bytes_per_elem = eager_unmeasured();
  // (added with our runtime's optimizer on the host) runtime/host_adam.cpp's step per parameter with every
  // core of the host, measured by `calibrate --backend cuda --only ulysses-kernels` (profile key
  // calibrated.ulysses_host_adam_ns_per_param); < 0: not measured (then kHostAdamParamsPerS)
  double ulysses_host_adam_s_per_param = -1;
  // (added with issue 12's deferred frees) the PyTorch process's host time to issue one tile of DeepSpeed's
  // TiledFusedLogitsLoss (forward and backward of the tile, with ZeRO-3's hooks), seconds: the phase clock's host
  // seconds of 'logits.fwd' over its tiles in `calibrate --backend deepspeed --tiled-logits`, the GPU idle when the
  // loss starts (profile key calibrated.pytorch_host_logits_tile_ms); < 0: not measured (sim/step_allocs.hpp: then tile 1)
  double pytorch_host_logits_tile_s = -1;
  // (added with the op bench's zero_step rows) DeepSpeed ZeRO-3 around the optimizer, per parameter of
  // the rank's partition: engine.step() with torch.optim.AdamW on the GPU; with DeepSpeed's FusedAdam
  // on the GPU (plan.torch_adam false); engine.step() with offload_optimizer (DeepSpeedCPUAdam, one
  // process); the backward's extra time with offload (the gradient partitions' copies to the host).
  // Seconds per parameter; < 0: not measured
  double zero3_torch_adamw_step_s_per_param = -1;
  double zero3_fused_adam_step_s_per_param = -1;
  double zero3_offload_step_s_per_param = -1;
  double zero3_offload_grads_s_per_param = -1;
};

struct HardwareProfile {
  std::string name;                  // e.g. h200-sxm-141gb
  std::string gpu;                   // marketing name
  core::bytes_t hbm_bytes = 0;             // per GPU
  double bf16_dense_flops = 0;       // FLOP/s per GPU, dense (no sparsity)
  double hbm_GBps = 0;
  double nvlink_GBps = 0;            // per GPU per direction
  std::int64_t gpus_per_node = 0;
  core::bytes_t host_ram_bytes = 0;        // per node
  double host_link_GBps = 0;         // PCIe per GPU per direction
  double nic_GBps = 0;               // per GPU per direction
  // uncalibrated defaults for efficiencies (fractions of peak); documented per profile
  double attn_fwd_eff = 0;           // default attention forward efficiency
  double attn_bwd_eff = 0;
  double gemm_eff = 0;
  double a2a_link_eff = 0;           // achievable busbw / link bandwidth at large sizes
  double a2a_alpha_s = 0;            // all-to-all latency
  core::bytes_t cuda_context_bytes = 0;
  core::bytes_t nccl_buffer_bytes = 0;
  std::vector<std::pair<std::string, std::string>> sources;  // field -> where it comes from
  bool has_calibration = false;
  Calibration calibrated;
};

enum class KvStrategy { replicate, send_once };  // when P > H_kv (docs/DESIGN.md head rules)
// RMSNorm as the training stack runs it (docs/MODEL.md "Peak of one layer"): eager = HF
// LlamaRMSNorm in PyTorch ops (autograd keeps an fp32 copy of the input and the bf16
// normalized tensor); fused = a Liger/Apex-style kernel keeping the bf16 input and fp32 rstd.
enum class RmsNormImpl { eager, fused };
// The process that runs the step: pytorch (HF + Accelerate + DeepSpeed, what users run; fixed costs
// calibrated.pytorch_*) or ulysses (this project's CUDA runtime; calibrated.cuda_context/nccl_buffer).
enum class Runtime { pytorch, ulysses };

struct Plan {
  std::int64_t sp_size = 1;                 // P
  std::int64_t dp_replicate_size = 1;
  std::int64_t dp_shard_size = 1;
  bool dp_shard_auto = false;               // dp_shard_size follows gpus / (sp_size * dp_replicate_size)
                                            // (0 when not divisible); set by `dp_shard_size: auto`
  int zero_stage = 3;
  bool offload_optimizer = false;
  bool offload_params = false;
  bool activation_checkpointing = true;
  bool offload_checkpoints = false;
  bool tiled_logits = false;                // tiled logits + loss
  bool tiled_mlp = false;
  std::string attn_implementation = "flash_attention_2";  // flash_attention_2 | sdpa | ulysses_flash | ...
  std::int64_t micro_batch_size = 1;        // B
  std::int64_t seq_len = 0;                 // S (global)
  std::int64_t pad_to_multiple_of = 0;      // 0 = no padding; S is padded up to lcm(this, P)
  KvStrategy kv_strategy = KvStrategy::replicate;
  double reduce_bucket_size = 5e8;          // DeepSpeed reduce_bucket_size (elements)
  RmsNormImpl rmsnorm_implementation = RmsNormImpl::eager;  // eager (HF default) | fused
  // DeepSpeed's optimizer.params.torch_adam: the GPU optimizer is torch.optim.AdamW (foreach)
  // instead of DeepSpeed's FusedAdam (the default); with offload_optimizer CPU Adam runs either way
  bool torch_adam = false;
  Runtime runtime = Runtime::pytorch;
  // PyTorch's caching allocator maps growable segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,
  // the ALST recipe): under memory pressure its free pages are unmapped before an allocation fails, so
  // what binds is what is allocated (docs/MODEL.md "Fixed costs and fragmentation")
  bool expandable_segments = true;
};

struct Workload {
  bool causal = true;
};

struct Scenario {
  std::string name;              // file stem or "cli"
  ModelSpec model;
  HardwareProfile hw;
  Plan plan;
  Workload workload;
  std::int64_t gpus = 1;          // world size = dp_replicate * dp_shard * sp
  std::int64_t gpus_per_node = 0; // 0 = the profile's
  core::bytes_t host_ram_bytes = 0;     // per node; 0 = the profile's
};

// The scenario's own node size and host RAM, else the profile's (the one rule for "0 = the profile's").
inline std::int64_t resolved_gpus_per_node(const Scenario& sc) {
  return sc.gpus_per_node > 0 ? sc.gpus_per_node : sc.hw.gpus_per_node;
}
inline core::bytes_t resolved_host_ram_bytes(const Scenario& sc) {
  return sc.host_ram_bytes > 0 ? sc.host_ram_bytes : sc.hw.host_ram_bytes;
}

}  // namespace ulysses
