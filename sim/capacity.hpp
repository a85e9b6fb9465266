#pragma once
// Longest sequence that fits: binary search over S (memory is monotone in S).
#include <cstdint>

#include "sim/prediction.hpp"
#include "sim/scenario.hpp"

namespace ulysses {

struct CapacityResult {
  std::int64_t max_seq_len = 0;     // largest S (multiple of lcm(P, granularity)) that fits; 0 = none
  std::int64_t step = 0;            // the multiple searched (lcm(P, granularity))
  Binding binding = Binding::none;  // what fails first at max_seq_len + step
  Prediction at_max;                // full prediction at max_seq_len (or at `step` when nothing fits)
  int evaluations = 0;              // predict() calls made
};

// Ignores sc.plan.seq_len. Upper bound of the search: kMaxSeqLen (2^40 tokens). InputError
// (key granularity) unless 1 <= lcm(granularity, sp_size) <= that bound.
CapacityResult find_max_seq_len(const Scenario& sc, std::int64_t granularity);

}  // namespace ulysses
