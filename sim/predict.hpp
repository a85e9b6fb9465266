#pragma once
// The cost model entry points (docs/MODEL.md). predict() is allocation-free and O(1).
#include "sim/prediction.hpp"
#include "sim/scenario.hpp"

namespace ulysses {

// Memory (per GPU, host per node) and time (per phase, step, block) at scenario.plan.seq_len.
// Precondition: the scenario passed validate() (sim/config.hpp); seq_len > 0.
Prediction predict(const Scenario& sc);

}  // namespace ulysses
