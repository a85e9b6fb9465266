#pragma once
// The CUDA microbenchmarks behind `ulysses bench` (cli/cmd_bench.cpp), one per file:
// exchange_bench.cpp, attention_bench.cpp, attention_sweep_bench.cpp (validator:
// attention_validate.cpp), layer_bench.cpp. Every one validates, warms up, then times; times are per rank (CUDA
// events), reported as the max over ranks of the per-rank median and the max over ranks and
// iterations.
//
// Bus bandwidth as nccl-tests defines it for all-to-all: algbw = bytes_per_rank / time,
// busbw = algbw * (P-1)/P (the fraction of each rank's bytes that crosses a link).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/attn_points.hpp"
#include "runtime/backend.hpp"

namespace ulysses::bench {

using runtime::BlockShape;
using runtime::RunOptions;

struct BenchRow {
  std::string name;
  std::int64_t bytes_per_rank = 0;   // exchange rows
  double flops = 0;                  // attention rows (per rank)
  double median_s = 0;               // max over ranks of the per-rank median
  double max_s = 0;                  // max over ranks and iterations
  std::int64_t wrong = -1;           // validation #wrong (-1: not run)
  std::string note;
};

struct BenchResult {
  std::string device;
  std::vector<BenchRow> rows;
  bool launcher_follower = false;    // launcher mode, rank > 0: the caller should print nothing
};

double algbw_GBps(const BenchRow& r);
double busbw_GBps(const BenchRow& r, std::int64_t P);

// q, k, v exchange (a2a.qkv.fwd: pack + one NCCL group + unpack, for each slice count) next to
// a bare ncclAlltoAll and a bare grouped ncclSend/ncclRecv of the same bytes per rank.
BenchResult bench_exchange(const BlockShape& s, const RunOptions& opt, const std::vector<int>& slices);

// A decoder layer's kernels outside attention and its projections (bench/layer_bench.cpp) at one
// rank's shapes: T tokens, hidden h, MLP F, H / H_kv heads of D. Rows: bytes_per_rank = compulsory
// bytes (elementwise kernels), flops (GEMMs).
struct LayerShape {
  std::int64_t T = 0, h = 0, F = 0, H = 0, H_kv = 0, D = 0;
};
BenchResult bench_layer(const LayerShape& s, const RunOptions& opt);

// Local attention of one rank (H/P heads, full S) forward and backward, reference and flash
// kernels; validated first against an fp64 oracle at S_check = min(S, 512).
BenchResult bench_attention(const BlockShape& s, const RunOptions& opt);

// ---- attention sweep: `ulysses bench attention --sweep | --quick | --points` ----
// One GPU (device 0 of this process), B = 1, flash kernel only; the heads given are the local
// heads. Per point, validation first, then timing:
//   1. fp64 CPU oracle (runtime/reference_attention.hpp) at S_c = min(S, check_seq) with the point's
//      H, H_kv, D and causal flag: o, dq, dk, dv, outputs and workspace poisoned (NaN) first;
//      done once per distinct (S_c, H, H_kv, D, causal) and reused by the other S.
//   2. full S, outputs, lse and workspace poisoned, one fwd + bwd (also the warm-up): no
//      non-finite value left in o, dq, dk, dv; and spot rows (q heads 0 and H-1, rows 0, S/3,
//      2S/3+1, S-1) of o, lse and dq against fp64 computed on the host from the same inputs.
//   #wrong = the sum of both. Then fwd and bwd are timed separately (CUDA events around each
//   launch): repetitions until at least min_reps and at least min_time_s of timed work (at most
//   max_reps); the median.
// A point whose buffers do not fit is reported with status "out of memory", not thrown.
struct AttnSweepOptions {
  int min_reps = 3;
  double min_time_s = 0.3;
  int max_reps = 1000;  // as the PyTorch peers (bench/peers/attn_peer.py bench_ms): both time --min-time-s alike
  std::int64_t check_seq = 256;
  std::uint64_t seed = 1234;
  double timeout_s = 300;  // watchdog of each host wait
};

struct AttnSweepRow {
  AttnPoint point;
  std::string status;            // "ok", "validation failed", "out of memory: ...", "not supported: ..."
  std::int64_t wrong = -1;       // oracle + full-S checks (-1: not validated)
  std::string check;             // what was checked and the worst error / tolerance
  double fwd_flops = 0, bwd_flops = 0;
  double fwd_s = 0, bwd_s = 0;   // medians (0: not timed)
  int fwd_reps = 0, bwd_reps = 0;
  double wall_s = 0;             // host wall time spent on the point (checks included)
};

// Runs every point in order, calling on_row after each (progress); returns the rows. Throws on
// CUDA errors other than out-of-memory and unsupported shapes. device: the GPU's name.
std::vector<AttnSweepRow> bench_attention_sweep(const std::vector<AttnPoint>& points, const AttnSweepOptions& opt,
                                                const std::function<void(const AttnSweepRow&)>& on_row,
                                                std::string* device);

}  // namespace ulysses::bench
