#pragma once
// The longest sequence of a whole step on the deepspeed backend or our runtime, predicted and bisected.
//
// A capacity case runs under a ballast: the worker holds `ballast` bytes of device memory all run
// long, so the GPU has HBM - ballast for the run and a probe step stays short. The prediction is
// the planner's (find_max_seq_len) with the profile's HBM reduced by the same ballast; the OOM
// decision is the caching allocator's (reserved memory plus the process's fixed costs).
// Bisection: worker processes probe increasing lengths (a ladder) until one runs out of memory;
// the next process probes inside the bracket found.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/deepspeed/step_run.hpp"

#include "sim/capacity.hpp"
#include "sim/scenario.hpp"

namespace ulysses::eval {

// The longest S with hbm reduced by `ballast` (multiples of lcm(sp, granularity)): the planner's for the
// PyTorch stack (plan.runtime pytorch), sim/step_runtime_memory.hpp's for our runtime (ulysses).
CapacityResult predicted_step_capacity(Scenario sc, std::int64_t ballast, std::int64_t granularity);

// n lengths, multiples of g, increasing and distinct, strictly between lo and hi (lo < hi);
// empty when no multiple of g lies strictly between them.
std::vector<std::int64_t> ladder_between(std::int64_t lo, std::int64_t hi, int n, std::int64_t g);
// The first ladder around a predicted S: fractions 0.8 .. 2.0 of it (multiples of g, >= g).
std::vector<std::int64_t> first_ladder(std::int64_t predicted, std::int64_t g);

// The bisection: up to 3 worker processes (rounds), each probing one increasing ladder until a length
// runs out of memory. Round 1: first_ladder(predicted); then, with nothing out of memory, twice and
// three times the longest probed; with the first probe out of memory, 4 lengths below it; else 5
// inside the bracket. Stops when the bracket is within 2 % (the capacity target is 3 %).
struct Bisection {
  std::int64_t fits = 0;      // the longest length that ran (0: none did)
  std::int64_t first_oom = 0; // the shortest length that ran out of memory (0: none did)
  std::vector<runtime::ProbeResult::Probe> ran;  // every length that ran, in probe order
  std::vector<std::int64_t> oom;                            // every length that ran out, in probe order
};
using ProbeLadder = std::function<runtime::ProbeResult(const std::vector<std::int64_t>& ladder)>;
Bisection bisect_capacity(std::int64_t predicted, std::int64_t g, const ProbeLadder& probe,
                          const std::function<void(int round, const Bisection&)>& progress = {});

}  // namespace ulysses::eval
