// JSON of plan/predict results and scenarios (reports/json_out.hpp), and the checks `report` makes
// when it reads them back.
#include "reports/json_out.hpp"

#include <fmt/format.h>

#include <climits>

#include "reports/json_in.hpp"
#include "sim/phases.hpp"

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

std::int64_t resolved_gpus_per_node(const Scenario& sc) {
  return sc.gpus_per_node > 0 ? sc.gpus_per_node : sc.hw.gpus_per_node;
}
bytes_t resolved_host_ram_bytes(const Scenario& sc) {
  return sc.host_ram_bytes > 0 ? sc.host_ram_bytes : sc.hw.host_ram_bytes;
}

Json scenario_json(const Scenario& sc) {
  const auto& m = sc.model;
  const auto& p = sc.plan;
  Json j = Json::object();
  j["name"] = sc.name;
  j["model"] = {{"name", m.name},         {"layers", m.layers},     {"hidden", m.hidden},
                {"heads", m.heads},       {"kv_heads", m.kv_heads}, {"head_dim", m.head_dim},
                {"ffn_hidden", m.ffn_hidden}, {"vocab", m.vocab},   {"tied_embeddings", m.tied_embeddings}};
  j["profile"] = {{"name", sc.hw.name}, {"gpu", sc.hw.gpu}, {"hbm_bytes", sc.hw.hbm_bytes},
                  {"calibrated", sc.hw.has_calibration}};
  j["gpus"] = sc.gpus;
  j["gpus_per_node"] = resolved_gpus_per_node(sc);
  j["host_ram_bytes_per_node"] = resolved_host_ram_bytes(sc);
  j["plan"] = {{"sp_size", p.sp_size},
               {"dp_replicate_size", p.dp_replicate_size},
               {"dp_shard_size", p.dp_shard_size},
               {"zero_stage", p.zero_stage},
               {"offload_optimizer", p.offload_optimizer},
               {"offload_params", p.offload_params},
               {"activation_checkpointing", p.activation_checkpointing},
               {"offload_checkpoints", p.offload_checkpoints},
               {"tiled_logits", p.tiled_logits},
               {"tiled_mlp", p.tiled_mlp},
               {"attn_implementation", p.attn_implementation},
               {"micro_batch_size", p.micro_batch_size},
               {"seq_len", p.seq_len},
               {"pad_to_multiple_of", p.pad_to_multiple_of},
               {"kv_strategy", to_string(p.kv_strategy)}};
  j["workload"] = {{"causal", sc.workload.causal}};
  return j;
}

Json breakdown_json(const MemoryBreakdown& m) {
  Json j = Json::object();
  for (int i = 0; i < m.n; ++i) j[m.terms[i].name] = j.value(m.terms[i].name, bytes_t{0}) + m.terms[i].bytes;
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
  for (int i = 0; i < static_cast<int>(BlockPhase::count); ++i)
    block[std::string(kBlockPhaseNames[i])] = p.block[i];
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
  Json j = {{"command", "predict"}};
  j.update(prediction_json(p));
  j["binding"] = to_string(binding_of(p));
  j["scenario"] = scenario_json(sc);
  return j;
}

Json plan_result_json(const Scenario& sc, const CapacityResult& r, std::int64_t granularity) {
  Json j = {{"command", "plan"}};
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
