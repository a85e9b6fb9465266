#pragma once
// `ulysses bench attention --sweep | --quick | --points S:H:HKV:D:CAUSAL[,...]` (issue #5): the
// flash kernel over a grid of local-attention shapes on one GPU (validated, then timed), then
// PyTorch's flash (FA2) and cuDNN SDPA backends on the same points in the same call
// (bench/peers/attn_peer.py as a subprocess, after our buffers are freed), one table of TFLOP/s
// and ratios (ours / peer) with a geometric-mean summary per D; --json / --csv write every row.
// The command line (flags and their rules) is cli/cmd_bench.cpp's.
#include <cstdint>
#include <string>
#include <vector>

#include "bench/attn_points.hpp"

namespace ulysses::bench {

// What the command line asked for (checked by the caller, but timeout_s: InputError when <= 0)
struct SweepRequest {
  std::vector<AttnPoint> points;
  int min_reps = 3;                 // timed repetitions per pass, at least
  double min_time_s = 0.3;          // timed seconds per pass, at least
  std::int64_t check_seq = 256;     // S of the fp64 oracle check
  std::uint64_t seed = 1234;
  double timeout_s = 300;           // watchdog of each host wait
  bool peer = true;                 // run bench/peers/attn_peer.py after ours
  std::string peer_python = "python3";
  std::string json_path, csv_path;  // every row, written whole at the end (empty: not written)
};

// Runs the sweep and prints progress and the table (CUDA builds; others print one line and
// return 1). Exit code: 1 when any of our points fails validation or cannot run for a reason
// other than memory; the peer's failure (no torch, no GPU) is reported in one line and does not
// change it.
int run_attention_sweep(const SweepRequest& req);

}  // namespace ulysses::bench
