#pragma once
// The cost model entry points (docs/MODEL.md). predict() is allocation-free and O(1).
#include "sim/model_terms.hpp"
#include "sim/prediction.hpp"
#include "sim/scenario.hpp"

namespace ulysses {

// Memory (per GPU, host per node) and time (per phase, step, block) at scenario.plan.seq_len.
// Precondition: the scenario passed validate() (sim/config.hpp); seq_len > 0.
// What depends on the model and the plan's ZeRO settings alone (sim/model_terms.hpp) is computed
// once per structure: each thread keeps the last few, looked up by their whole key.
Prediction predict(const Scenario& sc);
// The same with the model terms given: mt = model_terms(model_terms_key(sc, derive_dims(sc))).
Prediction predict(const Scenario& sc, const ModelTerms& mt);

}  // namespace ulysses
