#pragma once
// Microbenchmarks behind `ulysses bench` (cli/cmd_bench.cpp). Every one validates, warms up,
// then times; times are per rank (CUDA events), reported as the max over ranks of the per-rank
// median and the max over ranks and iterations.
//
// Bus bandwidth as nccl-tests defines it for all-to-all: algbw = bytes_per_rank / time,
// busbw = algbw * (P-1)/P (the fraction of each rank's bytes that crosses a link).
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/backend.hpp"

namespace ulysses::runtime::cuda {

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

// Local attention of one rank (H/P heads, full S) forward and backward, reference and flash
// kernels; validated first against an fp64 oracle at S_check = min(S, 512).
BenchResult bench_attention(const BlockShape& s, const RunOptions& opt);

}  // namespace ulysses::runtime::cuda
