#pragma once
// Families of the memory terms of sim/memory.cpp (GPU and host): the one table that groups the
// terms for plots and summaries (a few families instead of ~20 terms). Every term has a family;
// tests/sim/test_memory_families.cpp checks that against the terms predict() writes.
#include <array>
#include <string_view>

namespace ulysses {

enum class MemoryFamily { params, gradients, optimizer, activations, attention, fixed };

// Display names, in stacking order (bottom to top), indexed by MemoryFamily.
inline constexpr std::array<const char*, 6> kMemoryFamilyNames = {
    "weights/params", "gradients", "optimizer", "activations/checkpoints", "attention/exchange buffers",
    "fixed/allocator"};

struct TermFamily {
  const char* term;
  MemoryFamily family;
};

// GPU terms, then the host terms not already named (a name means the same thing on both sides).
inline constexpr TermFamily kMemoryTermFamilies[] = {
    {"weights", MemoryFamily::params},
    {"zero3_gathered_params", MemoryFamily::params},
    {"params", MemoryFamily::params},  // host: offloaded bf16 parameters
    {"grads", MemoryFamily::gradients},
    {"grad_reduce_buffers", MemoryFamily::gradients},
    {"pinned_staging", MemoryFamily::gradients},  // host: the fp32 reduce bucket copied to host
    {"optimizer_states", MemoryFamily::optimizer},
    {"optimizer_step", MemoryFamily::optimizer},
    {"checkpoints", MemoryFamily::activations},
    {"saved_activations", MemoryFamily::activations},
    {"layer.mlp", MemoryFamily::activations},
    {"layer.norms_residuals", MemoryFamily::activations},
    {"layer.rmsnorm_eager", MemoryFamily::activations},
    {"layer.grads_in_flight", MemoryFamily::activations},  // grad of the residual stream
    {"logits_loss", MemoryFamily::activations},
    {"layer.qkvo_seq", MemoryFamily::attention},
    {"layer.qkvo_head", MemoryFamily::attention},
    {"layer.a2a_buffers", MemoryFamily::attention},
    {"layer.attn_stats", MemoryFamily::attention},
    {"layer.attn_workspace", MemoryFamily::attention},
    {"cuda_context", MemoryFamily::fixed},
    {"nccl_buffers", MemoryFamily::fixed},
    {"fragmentation", MemoryFamily::fixed},
    {"process_overhead", MemoryFamily::fixed},  // host: per GPU process
};

// The family name of a term; nullptr when the table does not name it.
constexpr const char* memory_family_name(std::string_view term) {
  for (const auto& tf : kMemoryTermFamilies)
    if (term == tf.term) return kMemoryFamilyNames[static_cast<int>(tf.family)];
  return nullptr;
}

}  // namespace ulysses
