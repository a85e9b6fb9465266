// Run configs out (reports/run_config_out.hpp): the Accelerate YAML and DeepSpeed JSON of a plan,
// and the echo of the run configs read.
#include "reports/run_config_out.hpp"
#include "sim/fs_query.hpp"

#include <filesystem>
#include <sstream>

#include <fmt/format.h>

#include "reports/file_out.hpp"
#include "sim/config.hpp"
#include "core/errors.hpp"

namespace ulysses::reports {

namespace {

// Plan keys that neither Accelerate nor DeepSpeed config carries: the training script sets them
// (ALST: TiledMLP, tiled logits/loss, checkpoint offload, ...) and ulysses needs them as flags.
const char* const kScriptKeys[] = {"activation_checkpointing", "offload_checkpoints", "tiled_logits", "tiled_mlp",
                                   "kv_strategy", "pad_to_multiple_of", "rmsnorm_implementation",
                                   "expandable_segments", "runtime"};
// sp_attn_implementation values Accelerate 1.15 takes (utils/dataclasses.py:2292)
const char* const kSpAttn[] = {"sdpa", "flash_attention_2", "flash_attention_3"};

bool sp_attn_ok(const std::string& a) {
  for (const char* v : kSpAttn)
    if (a == v) return true;
  return false;
}

// "key: value" of the plan section of to_yaml (the loader's own names and spellings)
std::string plan_value(const std::string& yaml, const std::string& key) {
  std::istringstream in(yaml.substr(yaml.find("\nplan:\n")));
  std::string line;
  const std::string want = "  " + key + ": ";
  while (std::getline(in, line))
    if (line.rfind(want, 0) == 0) return line.substr(want.size());
  return "?";
}

std::int64_t machines_of(const Scenario& sc) {
  const std::int64_t gpn = resolved_gpus_per_node(sc);
  return sc.gpus > gpn ? sc.gpus / gpn : 1;
}

}  // namespace

Json deepspeed_config_json(const Scenario& sc) {
  const Plan& p = sc.plan;
  Json zero = {{"stage", p.zero_stage}};
  if (p.zero_stage > 0) zero["reduce_bucket_size"] = static_cast<std::int64_t>(p.reduce_bucket_size);
  if (p.offload_optimizer) zero["offload_optimizer"] = {{"device", "cpu"}, {"pin_memory", true}};
  if (p.offload_params) zero["offload_param"] = {{"device", "cpu"}, {"pin_memory", true}};
  Json params = {{"lr", 1e-5}, {"betas", {0.9, 0.999}}, {"eps", 1e-8}, {"weight_decay", 0.0},
                 {"torch_adam", p.torch_adam && !p.offload_optimizer}};
  return Json{{"sequence_parallel_size", p.sp_size},
              {"train_micro_batch_size_per_gpu", p.micro_batch_size},
              {"gradient_accumulation_steps", 1},
              {"train_batch_size", p.micro_batch_size * p.dp_replicate_size * p.dp_shard_size},
              {"bf16", {{"enabled", true}}},
              {"gradient_clipping", 1.0},
              {"zero_optimization", zero},
              {"optimizer", {{"type", "AdamW"}, {"params", params}}}};
}

void check_emittable(const Scenario& sc, const std::string& dir) {
  namespace fs = std::filesystem;
  if (path_exists(dir) && !path_is_dir(dir))
    throw core::InputError("", "--emit", fmt::format("'{}' exists and is not a folder", dir));
  if (path_is_dir(dir)) {
    try {
      check_can_write((fs::path(dir) / kDeepSpeedConfigName).string());
    } catch (const std::exception& e) {
      throw core::InputError("", "--emit", e.what());
    }
  }
  const std::int64_t gpn = resolved_gpus_per_node(sc);
  if (sc.gpus > gpn && sc.gpus % gpn != 0)
    throw core::InputError("", "--emit", fmt::format("gpus ({}) must be a multiple of gpus_per_node ({}): Accelerate starts "
                                               "num_processes / num_machines processes per node", sc.gpus, gpn));
  if (sc.plan.sp_size > 1 && !sp_attn_ok(sc.plan.attn_implementation))
    throw core::InputError("", "--emit", fmt::format("Accelerate's parallelism_config_sp_attn_implementation cannot be '{}' "
                                               "(sdpa, flash_attention_2 or flash_attention_3)", sc.plan.attn_implementation));
}

std::string accelerate_config_yaml(const Scenario& sc, const std::string& ds_file) {
  const Plan& p = sc.plan;
  const std::string yaml = to_yaml(sc);
  std::string out = fmt::format(
      "# HF Accelerate 1.15 config for `accelerate launch --config_file`, written by `ulysses plan --emit`:\n"
      "# {} on {} x {}, longest sequence {} tokens. Format: docs/INPUTS.md \"Run configs\".\n"
      "# Accelerate opens deepspeed_config_file from the directory it is launched in: launch from this folder.\n"
      "# Plan keys no Accelerate or DeepSpeed key carries (the training script sets them; pass them to ulysses as flags):\n",
      sc.model.name, sc.gpus, sc.hw.name, p.seq_len);
  for (const char* k : kScriptKeys) out += fmt::format("#   {}: {}\n", k, plan_value(yaml, k));
  if (p.sp_size == 1) out += fmt::format("#   attn_implementation: {}\n", plan_value(yaml, "attn_implementation"));
  out += "compute_environment: LOCAL_MACHINE\n";
  out += "debug: false\n";
  out += fmt::format("deepspeed_config:\n  deepspeed_config_file: {}\n", ds_file);
  out += "distributed_type: DEEPSPEED\n";
  out += "machine_rank: 0\n";
  out += "main_training_function: main\n";
  out += fmt::format("num_machines: {}\n", machines_of(sc));
  out += fmt::format("num_processes: {}\n", sc.gpus);
  out += "parallelism_config:\n";
  out += fmt::format("  parallelism_config_dp_replicate_size: {}\n", p.dp_replicate_size);
  out += fmt::format("  parallelism_config_dp_shard_size: {}\n", p.dp_shard_size);
  out += fmt::format("  parallelism_config_sp_size: {}\n", p.sp_size);
  out += "  parallelism_config_sp_backend: deepspeed\n";
  if (p.sp_size > 1) {  // Accelerate exports these only when sp_size > 1 (utils/launch.py:422-425)
    out += fmt::format("  parallelism_config_sp_seq_length: {}\n", p.seq_len);
    out += "  parallelism_config_sp_seq_length_is_variable: false\n";
    out += fmt::format("  parallelism_config_sp_attn_implementation: {}\n", p.attn_implementation);
  }
  out += "rdzv_backend: static\n";
  out += "same_network: true\n";
  out += "use_cpu: false\n";
  return out;
}

std::vector<std::string> emit_run_configs(const std::string& dir, const Scenario& sc) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!path_is_dir(dir)) throw std::runtime_error(fmt::format("cannot create folder '{}'", dir));
  const std::string ds = (fs::path(dir) / kDeepSpeedConfigName).string();
  const std::string acc = (fs::path(dir) / kAccelerateConfigName).string();
  write_file_atomic(ds, deepspeed_config_json(sc).dump(2) + "\n");  // first: the YAML never names a missing file
  write_file_atomic(acc, accelerate_config_yaml(sc, kDeepSpeedConfigName));
  return {acc, ds};
}

std::string run_config_echo_text(const RunConfigRead& rc) {
  std::string out, file;
  for (const auto& k : rc.keys) {
    if (k.file != file) out += fmt::format("read from {}:\n", file = k.file);
    out += fmt::format("  {} = {}", k.key, k.value);
    if (!k.target.empty()) out += fmt::format(" -> {} = {}", k.target, k.set_to);
    if (!k.note.empty()) out += fmt::format(" ({})", k.note);
    out += "\n";
  }
  return out;
}

Json run_config_echo_json(const RunConfigRead& rc) {
  Json a = Json::array();
  for (const auto& k : rc.keys)
    a.push_back({{"file", k.file}, {"key", k.key}, {"value", k.value}, {"target", k.target}, {"set_to", k.set_to},
                 {"note", k.note}});
  return a;
}

}  // namespace ulysses::reports
