#pragma once
// `ulysses bench attention --sweep | --quick | --points S:H:HKV:D:CAUSAL[,...]` (issue #5): the
// flash kernel over a grid of local-attention shapes on one GPU (validated, then timed), then
// PyTorch's flash (FA2) and cuDNN SDPA backends on the same points in the same call
// (bench/peers/attn_peer.py as a subprocess, after our buffers are freed), one table of TFLOP/s
// and ratios (ours / peer) with a geometric-mean summary per D; --json / --csv write every row.
// Exit code: 1 when any of our points fails validation or cannot run for a reason other than
// memory; the peer's failure (no torch, no GPU) is reported in one line and does not change it.
#include <string>
#include <vector>

#include "cli/attn_points.hpp"
#include "cli/options.hpp"

namespace ulysses::cli {

// --sweep, --quick, --points, --peer-python, --no-peer, --csv, --min-reps, --min-time-s, --check-seq
// (--json is bench's own option).
void add_attention_sweep_options(po::options_description& d);

// True when any of --sweep, --quick, --points is given.
bool attention_sweep_requested(const po::variables_map& vm);

// The points to run; InputError (exit 2) on bad or conflicting flags: --points' rules
// (attn_points.hpp), more than one of --sweep/--quick/--points, a sweep flag with another bench
// than attention, a scenario flag or --peer/--warmup/--iters with the sweep, bad repetitions.
std::vector<AttnPoint> attention_sweep_points(const po::variables_map& vm, const std::string& what,
                                              const po::options_description& scenario_options);

// Runs the sweep (CUDA builds; others print one line and return 1).
int run_attention_sweep(const po::variables_map& vm, const std::vector<AttnPoint>& points);

}  // namespace ulysses::cli
