#pragma once
// Peak bytes of one layer's Ulysses attention block (forward + backward) per rank when every
// buffer is freed after its last use, as the CPU reference backend allocates
// (runtime/cpu/cpu_backend.cpp). The CUDA backend allocates every buffer up front instead:
// block_peak_bytes (sim/memory.cpp). docs/MODEL.md "Block peak" lists both.
#include "sim/memory.hpp"

namespace ulysses {

core::bytes_t block_peak_bytes_freeing(const Dims& d);

}  // namespace ulysses
