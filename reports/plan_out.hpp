#pragma once
// What plan prints about the feature rungs: the --all-features choice and its reasons, --explain, and
// the --target-seq-len answer, as text tables and as JSON.
#include <string>
#include <vector>

#include "reports/json_out.hpp"
#include "sim/feature_search.hpp"

namespace ulysses::reports {

// --all-features: the chosen set, the rungs fixed by flags, and one reason per searched rung
// (`why`: rung_effects of the chosen scenario over the searched rungs).
std::string features_text(const RungSearch& s, RungSet fixed, const std::vector<RungEffect>& why);
Json features_json(const RungSearch& s, RungSet fixed, const std::vector<RungEffect>& why);

// --explain: what binds at one step past the longest S (q) and its largest terms, then one row per change.
std::string explain_text(const CapacityResult& r, const Prediction& q, const std::vector<RungEffect>& effects);
Json explain_json(const CapacityResult& r, const Prediction& q, const std::vector<RungEffect>& effects);

// --target-seq-len: the answer (or the best found), the options at that count, the counts scanned.
std::string target_text(const TargetResult& t, std::int64_t max_gpus, int max_options = 5);
Json target_json(const TargetResult& t, std::int64_t max_gpus);

}  // namespace ulysses::reports
