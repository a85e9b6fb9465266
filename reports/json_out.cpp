// JSON of plan/predict results and scenarios (reports/json_out.hpp), and the checks `report` makes
// when it reads them back.
#include "reports/json_out.hpp"

#include <fmt/format.h>

#include <charconv>
#include <climits>

#include <yaml-cpp/yaml.h>

#include "reports/format.hpp"
#include "reports/json_in.hpp"
#include "reports/version.hpp"
#include "sim/config.hpp"
#include "core/phases.hpp"

namespace ulysses::reports {

namespace {

constexpr std::int64_t kMaxInt = INT64_MAX;

// A breakdown object ({term: bytes, ..., total}): every value an integer >= 0, total present.
void check_breakdown(const JsonIn& b) {
  b.object();
  b.at("total").integer(0, kMaxInt);
  for (auto it = b.json().begin(); it != b.json().end(); ++it) b.at(it.key()).integer(0, kMaxInt);
}

}  // namespace

void check_result_json(const Json& j, const std::string& file) {
  const JsonIn in(j, file);
  const std::string command = in.at("command").str();
  if (command != "plan" && command != "predict") in.at("command").fail("must be plan or predict (got '" + command + "')");
  const JsonIn sc = in.at("scenario");
  sc.at("name").str();
  sc.at("gpus").integer(1, kMaxInt);
  sc.at("model").at("name").str();
  sc.at("profile").at("name").str();
  sc.at("plan").at("sp_size").integer(1, kMaxInt);
  in.at("seq_len").integer(0, kMaxInt);
  in.at("binding").str();
  if (in.has("label")) in.at("label").str();
  check_breakdown(in.at("gpu_memory_bytes"));
  check_breakdown(in.at("host_memory_bytes_per_node"));
  for (const char* k : {"step_time_s", "megatron_tflops_per_gpu", "gpu_capacity_bytes", "host_capacity_bytes_per_node"})
    in.at(k).number();
}

void check_sweep_summary_json(const Json& j, const std::string& file) {
  const JsonIn in(j, file);
  in.at("name").str();
  const std::string mode = in.at("mode").str();
  if (mode != "predict" && mode != "plan") in.at("mode").fail("must be predict or plan (got '" + mode + "')");
  for (const char* k : {"points", "valid", "skipped_total"}) in.at(k).integer(0, kMaxInt);
  in.at("threads").integer(1, kMaxInt);
  in.at("points_per_s").number();
  in.at("csv").str();
  const JsonIn skipped = in.at("skipped");
  skipped.object();
  for (auto it = skipped.json().begin(); it != skipped.json().end(); ++it) skipped.at(it.key()).integer(0, kMaxInt);
  const JsonIn axes = in.at("axes");
  for (std::size_t i = 0; i < axes.array().size(); ++i) axes.at(i).at("key").str();
  in.at("base").at("profile").at("hbm_bytes").number();
}

const char* to_string(KvStrategy k) { return k == KvStrategy::replicate ? "replicate" : "send_once"; }


namespace {

// A YAML node of to_yaml's text as JSON: quoted scalars are strings; plain ones true/false,
// integers and numbers by their text, anything else (auto, replicate, ...) a string.
Json yaml_to_json(const YAML::Node& n) {
  if (n.IsMap()) {
    Json j = Json::object();
    for (const auto& kv : n) j[kv.first.as<std::string>()] = yaml_to_json(kv.second);
    return j;
  }
  if (n.IsSequence()) {
    Json j = Json::array();
    for (const auto& v : n) j.push_back(yaml_to_json(v));
    return j;
  }
  if (!n.IsScalar()) return nullptr;
  const std::string& t = n.Scalar();
  if (n.Tag() == "!") return t;  // quoted
  if (t == "true" || t == "false") return t == "true";
  std::int64_t i = 0;
  const auto ri = std::from_chars(t.data(), t.data() + t.size(), i);
  if (ri.ec == std::errc() && ri.ptr == t.data() + t.size()) return i;
  double d = 0;
  const auto rd = std::from_chars(t.data(), t.data() + t.size(), d);
  if (rd.ec == std::errc() && rd.ptr == t.data() + t.size()) return d;
  return t;
}

}  // namespace

Json scenario_json(const Scenario& sc) {
  // Generated from to_yaml (sim/config.hpp), which writes every key of the model, profile and plan
  // tables: a key added to a table is echoed without a change here. Keys keep their input names and
  // units (hbm_GiB, a2a_alpha_us); the resolved values that the files may leave out are added.
  const YAML::Node y = YAML::Load(to_yaml(sc));
  Json j = yaml_to_json(y);
  j["gpus_per_node"] = resolved_gpus_per_node(sc);
  j["host_mem_GiB"] = core::to_GiB(resolved_host_ram_bytes(sc));
  j["host_ram_bytes_per_node"] = resolved_host_ram_bytes(sc);
  Json& prof = j["profile"];
  prof.erase("sources");  // provenance text, no input to the model
  prof.erase("calibrated");
  prof["hbm_bytes"] = sc.hw.hbm_bytes;
  prof["calibrated"] = sc.hw.has_calibration;
  // the calibrated curves (often kilobytes) as a fingerprint of the values used
  if (sc.hw.has_calibration && y["profile"]["calibrated"])
    prof["calibration_fnv1a64"] = fnv1a64_hex(YAML::Dump(y["profile"]["calibrated"]));
  j["plan"]["dp_shard_size"] = sc.plan.dp_shard_size;  // resolved (the file may say auto)
  j["plan"]["dp_shard_auto"] = sc.plan.dp_shard_auto;
  return j;
}

Json breakdown_json(const MemoryBreakdown& m) {
  Json j = Json::object();
  for (int i = 0; i < m.n; ++i) j[m.terms[i].name] = j.value(m.terms[i].name, core::bytes_t{0}) + m.terms[i].bytes;
  j["total"] = m.total();
  return j;
}

Json phases_json(const PhaseTimes& p) {
  Json j = Json::object();
  for (int i = 0; i < p.n; ++i) j[p.phases[i].name] = j.value(p.phases[i].name, 0.0) + p.phases[i].time_s;
  return j;
}

Json prediction_json(const Prediction& p) {
  Json j = Json::object();
  j["seq_len"] = p.seq_len;
  j["padded_seq_len"] = p.padded_seq_len;
  j["s_local"] = p.s_local;
  j["fits_gpu"] = p.fits_gpu;
  j["fits_host"] = p.fits_host;
  j["gpu_capacity_bytes"] = p.gpu_capacity_bytes;
  j["host_capacity_bytes_per_node"] = p.host_capacity_bytes;
  j["gpu_memory_bytes"] = breakdown_json(p.gpu);
  j["gpu_peak_at"] = p.gpu_peak_at ? p.gpu_peak_at : "";
  j["gpu_allocator_bytes"] = {{"reserved", predicted_reserved_bytes(p)}, {"allocated", predicted_allocated_bytes(p)}};
  j["host_memory_bytes_per_node"] = breakdown_json(p.host);
  j["phases_s"] = phases_json(p.step);
  Json block = Json::object();
  for (int i = 0; i < static_cast<int>(core::BlockPhase::count); ++i)
    block[std::string(core::kBlockPhaseNames[i])] = p.block[i];
  j["block_s"] = block;
  j["block_peak_bytes"] = p.block_peak_bytes;
  j["a2a_q_bytes_per_rank"] = p.a2a_q_bytes_per_rank;
  j["a2a_kv_bytes_per_rank"] = p.a2a_kv_bytes_per_rank;
  j["step_time_s"] = p.step_time_s;
  j["tokens_per_s"] = p.tokens_per_s;
  j["hw_tflops_per_gpu"] = p.hw_tflops_per_gpu;
  j["megatron_tflops_per_gpu"] = p.megatron_tflops_per_gpu;
  return j;
}

Binding binding_of(const Prediction& p) {
  if (!p.fits_gpu) return Binding::gpu_hbm;
  if (!p.fits_host) return Binding::host_ram;
  return Binding::none;
}

Json predict_result_json(const Scenario& sc, const Prediction& p) {
  Json j = {{"command", "predict"}, {"version", version_json()}};
  j.update(prediction_json(p));
  j["binding"] = to_string(binding_of(p));
  j["scenario"] = scenario_json(sc);
  return j;
}

Json plan_result_json(const Scenario& sc, const CapacityResult& r, std::int64_t granularity) {
  Json j = {{"command", "plan"}, {"version", version_json()}};
  j.update(prediction_json(r.at_max));
  j["seq_len"] = r.max_seq_len;  // the longest that fits (0: nothing fits)
  j["evaluated_seq_len"] = r.at_max.seq_len;
  j["fits"] = r.max_seq_len > 0;
  j["binding"] = to_string(r.binding);
  j["step"] = r.step;
  j["granularity"] = granularity;
  j["evaluations"] = r.evaluations;
  j["scenario"] = scenario_json(sc);
  return j;
}

namespace {
void flatten_into(const Json& j, const std::string& prefix, std::vector<std::pair<std::string, std::string>>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it)
      flatten_into(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), out);
    return;
  }
  if (j.is_string()) out.emplace_back(prefix, j.get<std::string>());
  else if (j.is_number_float()) out.emplace_back(prefix, fmt::format("{:.6g}", j.get<double>()));
  else out.emplace_back(prefix, j.dump());
}
}  // namespace

std::vector<std::pair<std::string, std::string>> flatten(const Json& j) {
  std::vector<std::pair<std::string, std::string>> out;
  flatten_into(j, "", out);
  return out;
}

}  // namespace ulysses::reports
