#pragma once
// Test fixtures: real model architectures and datasheet hardware figures, built directly in
// C++ (independent of the YAML presets, which have their own tests).
//   Llama-3.1-8B / 70B: config.json of meta-llama/Llama-3.1-{8B,70B} (HF hub).
//   H100 SXM / H200 SXM: NVIDIA datasheets; DGX H100 / H200 system specs for host RAM.
// Efficiencies and fixed costs below are fixture values in the range of ANCHORS.md, not a
// calibrated profile: tests use them as inputs and assert properties, not these values.
#include <cstdint>

#include "sim/scenario.hpp"

namespace ulysses::test {

inline ModelSpec llama31_8b() {
  ModelSpec m;
  m.name = "llama-3.1-8b";
  m.layers = 32; m.hidden = 4096; m.heads = 32; m.kv_heads = 8; m.head_dim = 128;
  m.ffn_hidden = 14336; m.vocab = 128256; m.tied_embeddings = false;
  m.published_params = 8030261248;  // 8.03B, HF model card
  m.source = "meta-llama/Llama-3.1-8B config.json";
  return m;
}

inline ModelSpec llama31_70b() {
  ModelSpec m;
  m.name = "llama-3.1-70b";
  m.layers = 80; m.hidden = 8192; m.heads = 64; m.kv_heads = 8; m.head_dim = 128;
  m.ffn_hidden = 28672; m.vocab = 128256; m.tied_embeddings = false;
  m.published_params = 70553706496;  // 70.6B, HF model card
  m.source = "meta-llama/Llama-3.1-70B config.json";
  return m;
}

inline HardwareProfile h100_sxm() {
  HardwareProfile p;
  p.name = "h100-sxm-80gb";
  p.gpu = "NVIDIA H100 SXM5 80GB";
  // "80 GB" HBM3: the device reports ~80 GiB-class capacity; we use exactly 80 GiB.
  p.hbm_bytes = std::int64_t{85899345920};  // 80 * 2^30
  p.bf16_dense_flops = 989.4e12;            // dense bf16 (1979 TFLOP/s with sparsity)
  p.hbm_GBps = 3350;
  p.nvlink_GBps = 450;                       // NVLink4: 900 GB/s bidirectional
  p.gpus_per_node = 8;
  p.host_ram_bytes = std::int64_t{2} << 40;  // DGX H100: 2 TiB
  p.host_link_GBps = 55;                     // PCIe Gen5 x16 achievable per direction (64 theoretical)
  p.nic_GBps = 50;                           // 400 Gb/s ConnectX-7 per GPU
  p.attn_fwd_eff = 0.34;                     // FA2-class (ANCHORS: ~330-370 TFLOP/s)
  p.attn_bwd_eff = 0.33;
  p.gemm_eff = 0.8;                          // ANCHORS: ~790 TFLOP/s dense bf16 GEMM
  p.a2a_link_eff = 0.7;                      // ANCHORS: 331 GB/s busbw / 478 GB/s link at 1 GiB
  p.a2a_alpha_s = 20e-6;
  p.cuda_context_bytes = std::int64_t{1} << 30;
  p.nccl_buffer_bytes = std::int64_t{1} << 30;
  return p;
}

inline HardwareProfile h200_sxm() {
  HardwareProfile p = h100_sxm();
  p.name = "h200-sxm-141gb";
  p.gpu = "NVIDIA H200 SXM 141GB";
  p.hbm_bytes = std::int64_t{141000000000};  // 141 GB (1e9)
  p.hbm_GBps = 4800;
  return p;
}

// ALST's usual recipe: ZeRO-3 over all GPUs, activation checkpointing, optimizer offload, B = 1.
inline Scenario make_scenario(const ModelSpec& m, const HardwareProfile& hw, std::int64_t gpus, std::int64_t sp,
                              std::int64_t seq_len) {
  Scenario sc;
  sc.name = "test";
  sc.model = m;
  sc.hw = hw;
  sc.gpus = gpus;
  sc.plan.sp_size = sp;
  sc.plan.dp_shard_size = gpus / sp;
  sc.plan.dp_replicate_size = 1;
  sc.plan.zero_stage = 3;
  sc.plan.offload_optimizer = true;
  sc.plan.activation_checkpointing = true;
  sc.plan.seq_len = seq_len;
  return sc;
}

// All ALST features on: tiled logits/loss, TiledMLP, checkpoint offload (plus the recipe above).
inline Scenario all_features(Scenario sc) {
  sc.plan.tiled_logits = true;
  sc.plan.tiled_mlp = true;
  sc.plan.offload_checkpoints = true;
  return sc;
}

}  // namespace ulysses::test
