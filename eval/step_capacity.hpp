#pragma once
// The longest sequence of a whole step on the deepspeed backend, predicted and bisected.
//
// A capacity case runs under a ballast: the worker holds `ballast` bytes of device memory all run
// long, so the GPU has HBM - ballast for the run and a probe step stays short. The prediction is
// the planner's (find_max_seq_len) with the profile's HBM reduced by the same ballast; the OOM
// decision is the caching allocator's (reserved memory plus the process's fixed costs).
// Bisection: worker processes probe increasing lengths (a ladder) until one runs out of memory;
// the next process probes inside the bracket found.
#include <cstdint>
#include <vector>

#include "sim/capacity.hpp"
#include "sim/scenario.hpp"

namespace ulysses::eval {

// The planner's longest S with hbm reduced by `ballast` (multiples of lcm(sp, granularity)).
CapacityResult predicted_step_capacity(Scenario sc, std::int64_t ballast, std::int64_t granularity);

// n lengths, multiples of g, increasing and distinct, strictly between lo and hi (lo < hi);
// empty when no multiple of g lies strictly between them.
std::vector<std::int64_t> ladder_between(std::int64_t lo, std::int64_t hi, int n, std::int64_t g);
// The first ladder around a predicted S: fractions 0.8 .. 2.0 of it (multiples of g, >= g).
std::vector<std::int64_t> first_ladder(std::int64_t predicted, std::int64_t g);

}  // namespace ulysses::eval
