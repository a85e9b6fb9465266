#pragma once
// Memory model: GPU bytes per GPU (peak) and host bytes per node, as named breakdowns that
// sum to their totals. Every term and assumption is written in docs/MODEL.md.
// Allocation-free: term names are string literals, results go into fixed-size arrays.
#include <cstdint>
#include <vector>

#include "sim/model.hpp"
#include "sim/model_terms.hpp"
#include "sim/prediction.hpp"
#include "sim/scenario.hpp"

namespace ulysses {

// Stated constants of the model (docs/MODEL.md "Assumptions"). Not fitted to any result.
inline constexpr double kFragmentationFraction = 0.05;        // of the transient (activation) terms, without
                                                              // expandable segments (stated, not derived)
// With expandable segments: what stays mapped under memory pressure besides the live blocks, the 20 MiB
// granules that live blocks only partly cover (measured from the allocator's history, docs/MODEL.md)
inline constexpr core::bytes_t kExpandableGranuleSlackBytes = core::bytes_t{8} * (core::bytes_t{20} << 20);
inline constexpr core::bytes_t kHostProcessOverheadBytes = core::bytes_t{4} << 30;  // per GPU process
inline constexpr double kLogitsTileBytes = 1073741824.0;      // ALST: fp32 logits per tile <= 1 GiB
inline constexpr int kZero3LiveLayers = 2;                    // current layer + one prefetched
inline constexpr core::bytes_t kMaxTermBytes = core::bytes_t{1} << 57;    // saturation of one term (128 PiB)

// Everything predict() derives once from a scenario: dimension letters of docs/DESIGN.md plus
// the group sizes of the plan. All counts are int64 (elements, ranks, tokens).
struct Dims {
  std::int64_t B = 1, S = 0, S_req = 0, S_l = 0, P = 1;
  std::int64_t H = 0, H_kv = 0, D = 0, h = 0, F = 0, V = 0, L = 0;
  std::int64_t H_l = 0;     // H / P
  std::int64_t kv_local = 0;    // kv heads per rank after the exchange: max(H_kv, P) / P
  std::int64_t kv_wire = 0;     // kv heads exchanged per tensor: max(H_kv, P) (replicas count)
  bool kv_replica = false;      // a [B, S_l, P, D] replica of k and v is materialised
  std::int64_t zero_group = 1;  // N = dp_shard * sp: ranks ZeRO shards over
  std::int64_t dp_replicate = 1;
  std::int64_t gpus = 1, gpus_per_node = 1, gpus_on_node = 1;
  bool ckpt = true, causal = true;
  bool rmsnorm_eager = true;     // plan.rmsnorm_implementation == eager (fp32 saved norm inputs)
  std::int64_t mlp_shards = 1;    // TiledMLP: ceil(S_l / h), 1 when off
  std::int64_t logits_shards = 1; // tiled logits: ceil(B*S_l*V*4 / 1 GiB), 1 when off
  ParamCount params;
  std::int64_t total_params = 0;
};

std::int64_t lcm64(std::int64_t a, std::int64_t b);
// Padded S: ceil(S / m) * m with m = lcm(pad_to_multiple_of, P) when pad_to_multiple_of > 0.
std::int64_t padded_seq_len(std::int64_t S, std::int64_t pad_to_multiple_of, std::int64_t P);
Dims derive_dims(const Scenario& sc);

// Device bytes of the process outside its tensors: the CUDA context (PyTorch's, or our runtime's), and
// NCCL's buffers when more than one GPU runs (calibrated per runtime, else the profile's assumption).
core::bytes_t process_context_bytes(const Scenario& sc);
core::bytes_t process_nccl_bytes(const Scenario& sc, const Dims& d);

// torch.chunk(n items, chunks): chunks of ceil(n / chunks), the last one shorter, possibly fewer chunks
// than asked (TiledMLP's and the tiled loss's shards over the tokens).
std::vector<std::int64_t> torch_chunk_sizes(std::int64_t n, std::int64_t chunks);

// Bytes of one exchanged tensor per rank (bf16): q (or o) and one of k, v.
core::bytes_t q_bytes_per_rank(const Dims& d);   // B * S_l * H * D * 2
core::bytes_t kv_bytes_per_rank(const Dims& d);  // B * S_l * max(H_kv, P) * D * 2

// Fills p.gpu (per GPU peak), p.host (per node) and their capacities / fit flags.
// Returns the moment at which the GPU peak happens (a string literal, docs/MODEL.md).
// mt: model_terms(model_terms_key(sc, d)) (sim/model_terms.hpp).
const char* gpu_memory(const Scenario& sc, const Dims& d, const ModelTerms& mt, MemoryBreakdown& gpu);
void host_memory(const Scenario& sc, const Dims& d, MemoryBreakdown& host);
// Logits + loss working set: 14 bytes per logit of one tile (the whole B*S_l*V when untiled)
// plus three [B, S_l, h] bf16 tensors (final norm input and output, grad of the hidden state);
// with eager RMSNorm five (the norm keeps an fp32 input copy and the bf16 normalized tensor).
core::bytes_t logits_loss_bytes(const Dims& d);
// Peak bytes of one Ulysses attention block alone, fwd + bwd, as `ulysses run --backend cuda`
// allocates it (every buffer up front; docs/MODEL.md "Block peak").
core::bytes_t block_peak_bytes(const Scenario& sc, const Dims& d);

core::bytes_t gpu_capacity_bytes(const Scenario& sc);
core::bytes_t host_capacity_bytes(const Scenario& sc);

}  // namespace ulysses
