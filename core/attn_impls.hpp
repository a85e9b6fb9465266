#pragma once
// core/ (namespace ulysses::core), the ground floor: standard library only; every library may include it.
// The one table of attention implementations: a name (plan.attn_implementation, docs/INPUTS.md) ->
// the kernel the CUDA backend runs for it -> the calibrated key (profile attn_fwd_eff / attn_bwd_eff)
// that predicts what ran. The ulysses_* names name a kernel exactly; the PyTorch names stand for "the
// fast kernel" (flash, falling back to reference when flash refuses the shape or is not built) and are
// calibrated under their own keys when PyTorch runs them (the deepspeed backend).
#include <array>
#include <string_view>

namespace ulysses::core {

enum class AttnKernel { reference, flash };  // kernels/attention.hpp launches them

struct AttnImpl {
  std::string_view name;
  bool plan_name;     // a plan.attn_implementation value (false: an alias only `ulysses run` takes)
  AttnKernel kernel;  // what the CUDA backend runs
  bool fallback;      // flash may fall back to reference
};

// plan.attn_implementation values first, in the order messages list them.
inline constexpr std::array<AttnImpl, 11> kAttnImpls = {{
    {"flash_attention_2", true, AttnKernel::flash, true},
    {"flash_attention_3", true, AttnKernel::flash, true},
    {"sdpa", true, AttnKernel::flash, true},
    {"eager", true, AttnKernel::reference, false},
    {"flex_attention", true, AttnKernel::flash, true},
    {"ulysses_flash", true, AttnKernel::flash, false},
    {"ulysses_reference", true, AttnKernel::reference, false},
    {"", false, AttnKernel::flash, true},  // not set
    {"fa2", false, AttnKernel::flash, true},
    {"flash", false, AttnKernel::flash, false},
    {"reference", false, AttnKernel::reference, false},
}};

// The row of `name`; nullptr when the table has none.
constexpr const AttnImpl* find_attn_impl(std::string_view name) {
  for (const AttnImpl& a : kAttnImpls)
    if (a.name == name) return &a;
  return nullptr;
}

// The key under which a profile calibrates a kernel (the prediction of a CUDA-backend run).
constexpr std::string_view calibrated_key(AttnKernel k) { return k == AttnKernel::flash ? "ulysses_flash" : "ulysses_reference"; }

}  // namespace ulysses::core
