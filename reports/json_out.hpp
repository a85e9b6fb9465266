#pragma once
// JSON of plan and predict results (the machine-readable contract scripts parse):
//   seq_len, padded_seq_len, s_local, binding (plan), fits_gpu, fits_host,
//   gpu_memory_bytes {term: bytes, ..., total}, host_memory_bytes_per_node {term: bytes, ..., total},
//   gpu_allocator_bytes {reserved, allocated} (sim/prediction.hpp),
//   phases_s {phase: seconds}, block_s {block phase: seconds}, step_time_s, tokens_per_s,
//   hw_tflops_per_gpu, megatron_tflops_per_gpu, version {tool, git, schema} (reports/version.hpp),
//   scenario: the full resolved scenario (every key of docs/INPUTS.md, in its input units) plus
//   resolved gpus_per_node, host_ram_bytes_per_node, profile.hbm_bytes, profile.calibrated and a
//   fingerprint of the calibrated curves (profile.calibration_fnv1a64).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/capacity.hpp"
#include "sim/prediction.hpp"
#include "sim/scenario.hpp"

namespace ulysses::reports {

using Json = nlohmann::ordered_json;  // keeps keys in the order written

const char* to_string(KvStrategy k);

Json scenario_json(const Scenario& sc);
Json breakdown_json(const MemoryBreakdown& m);  // terms plus "total"
Json phases_json(const PhaseTimes& p);
Json prediction_json(const Prediction& p);
// A prediction at plan.seq_len: prediction_json + "binding" (what does not fit, or "none").
Json predict_result_json(const Scenario& sc, const Prediction& p);
// A capacity search: prediction_json(at_max) with seq_len = the longest that fits,
// binding = what fails first one step further, step, granularity, evaluations.
Json plan_result_json(const Scenario& sc, const CapacityResult& r, std::int64_t granularity);

// Binding at one evaluated length: gpu_hbm when the GPU does not fit, else host_ram when the
// host does not fit, else none.
Binding binding_of(const Prediction& p);

// What `report` reads of a plan/predict result (--format json) and of a sweep summary, checked
// before use: every problem is one InputError "<file>: <dotted.key>: <rule>" (reports/json_in.hpp).
void check_result_json(const Json& j, const std::string& file);
void check_sweep_summary_json(const Json& j, const std::string& file);

// Flattens nested objects into dotted keys ("gpu_memory_bytes.total"), in document order;
// arrays are written as JSON text. Used for the one-row CSV of plan and predict.
std::vector<std::pair<std::string, std::string>> flatten(const Json& j);

}  // namespace ulysses::reports
