#pragma once
// The largest sizes the model accepts (docs/INPUTS.md "Limits"). Every product the model forms from
// them stays exact in int64 and finite in double; a scenario past one is refused (config_check.cpp)
// with one line naming the key, never wrapped or saturated into a wrong number.
#include <cstdint>

namespace ulysses {

inline constexpr std::int64_t kMaxSeqLen = std::int64_t{1} << 40;   // S, also B * S and padded S (1.1e12 tokens)
inline constexpr std::int64_t kMaxGpus = std::int64_t{1} << 20;     // world size, each parallel size, GPUs per node
inline constexpr std::int64_t kMaxLayers = std::int64_t{1} << 14;
inline constexpr std::int64_t kMaxHidden = std::int64_t{1} << 18;   // hidden, heads * head_dim
inline constexpr std::int64_t kMaxHeads = std::int64_t{1} << 14;    // heads, kv_heads
inline constexpr std::int64_t kMaxHeadDim = std::int64_t{1} << 12;
inline constexpr std::int64_t kMaxFfn = std::int64_t{1} << 22;
inline constexpr std::int64_t kMaxVocab = std::int64_t{1} << 22;
inline constexpr double kMaxGiB = 1 << 30;
inline constexpr int kMaxThreads = 1024;                            // sweep --threads, the cpu backend's rank threads                          // any memory size given in GiB (1 EiB)

}  // namespace ulysses
