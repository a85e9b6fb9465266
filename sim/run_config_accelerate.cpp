// Reads an HF Accelerate 1.15 config YAML (commands/config/config_args.py ClusterConfig, plus the
// parallelism_config section) into scenario keys. File:line sources: docs/INPUTS.md "Run configs".
#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "sim/limits.hpp"
#include "sim/fs_query.hpp"
#include "sim/run_config_internal.hpp"

namespace ulysses {

namespace {

namespace fs = std::filesystem;

// utils/dataclasses.py DistributedType (1.15)
const std::vector<std::string> kDistributedTypes = {"NO",        "MULTI_CPU", "MULTI_GPU", "MULTI_NPU", "MULTI_MLU",
                                                    "MULTI_SDAA", "MULTI_MUSA", "MULTI_XPU", "DEEPSPEED", "FSDP",
                                                    "XLA",       "MEGATRON_LM", "MULTI_HPU", "MULTI_NEURON"};
// deepspeed_config keys Accelerate refuses next to deepspeed_config_file (utils/dataclasses.py:1507-1532)
const std::vector<std::string> kRefusedWithFile = {"gradient_accumulation_steps", "gradient_clipping", "zero_stage",
                                                   "offload_optimizer_device", "offload_param_device",
                                                   "offload_param_nvme_path", "offload_optimizer_nvme_path",
                                                   "zero3_save_16bit_model"};
const char* const kPrefix = "parallelism_config_";

bool contains(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

const YAML::Node* find(const std::vector<std::pair<std::string, YAML::Node>>& items, const std::string& k) {
  for (const auto& kv : items)
    if (kv.first == k) return &kv.second;
  return nullptr;
}

// offload_*_device: none | cpu -> false | true; nvme is refused
std::string offload_device(Reader& r, const YAML::Node& n, const std::string& key) {
  const std::string t = r.text(n, key, "none, cpu or nvme");
  if (t == "nvme") r.at(key).fail("NVMe offload is not modelled (use cpu or none)");
  if (t != "cpu" && t != "none") r.at(key).fail(fmt::format("must be none, cpu or nvme (got '{}')", t));
  return t == "cpu" ? "true" : "false";
}

// deepspeed_config: {deepspeed_config_file | zero_stage, offload_*_device, ...}; returns the JSON named
std::string read_deepspeed_section(Reader& r, const YAML::Node* section) {
  std::vector<std::pair<std::string, YAML::Node>> items;
  if (section != nullptr && !section->IsNull()) items = map_items(*section, r.at("deepspeed_config"));
  std::string json;
  if (const YAML::Node* f = find(items, "deepspeed_config_file")) {
    const std::string key = "deepspeed_config.deepspeed_config_file";
    const std::string t = r.text(*f, key, "a path to a DeepSpeed JSON");
    if (t != "none") {  // Accelerate's "no file" (utils/dataclasses.py:1265-1270)
      const fs::path p(t);
      json = (p.is_relative() && !r.dir().empty() ? fs::path(r.dir()) / p : p).string();
      if (!path_is_file(json))
        r.at(key).fail(fmt::format("cannot open '{}' (a relative path resolves against the YAML's folder)", json));
    }
    r.echo(key, t, t == "none" ? "no file" : "reads " + json);
  }
  for (const auto& [k, v] : items) {
    const std::string key = "deepspeed_config." + k;
    if (k == "deepspeed_config_file") continue;
    if (!json.empty() && contains(kRefusedWithFile, k))
      r.at(key).fail("Accelerate 1.15 refuses this key next to deepspeed_config_file (utils/dataclasses.py:1507-1532): "
                     "set it in the DeepSpeed JSON");
    if (k == "zero_stage") r.set(key, r.text(v, key, "0, 1, 2 or 3"), "plan.zero_stage", r.text(v, key, ""));
    else if (k == "offload_optimizer_device") r.set(key, v.Scalar(), "plan.offload_optimizer", offload_device(r, v, key));
    else if (k == "offload_param_device") r.set(key, v.Scalar(), "plan.offload_params", offload_device(r, v, key));
    else if (k == "gradient_accumulation_steps") {
      r.read().grad_accum = positive_int(scalar_of(v, r.at(key), "a positive integer"), r.at(key));
      r.echo(key, v.Scalar(), "checked with train_batch_size");
    } else r.unused(key, v);
  }
  if (json.empty()) {  // the YAML builds the DeepSpeed config: Accelerate's defaults for what it leaves out
    const char* src = "Accelerate default (utils/dataclasses.py:1238-1244)";
    if (!find(items, "zero_stage")) r.set("deepspeed_config.zero_stage", "(absent)", "plan.zero_stage", "2", src);
    if (!find(items, "offload_optimizer_device"))
      r.set("deepspeed_config.offload_optimizer_device", "(absent)", "plan.offload_optimizer", "false", src);
    if (!find(items, "offload_param_device"))
      r.set("deepspeed_config.offload_param_device", "(absent)", "plan.offload_params", "false", src);
  }
  return json;
}

// parallelism_config: {parallelism_config_sp_size, ...} (commands/launch.py:905-982: names, defaults)
void read_parallelism(Reader& r, const YAML::Node& section) {
  const auto items = map_items(section, r.at("parallelism_config"));
  for (const auto& [k, v] : items) {
    const std::string key = "parallelism_config." + k;
    const std::string name = k.rfind(kPrefix, 0) == 0 ? k.substr(std::string(kPrefix).size()) : "";
    if (name == "sp_size") {
      r.set(key, r.text(v, key, "a positive integer"), "plan.sp_size", v.Scalar());
      r.read().sp_size = r.scenario().plan.sp_size;
    } else if (name == "dp_replicate_size") r.set(key, r.text(v, key, "a positive integer"), "plan.dp_replicate_size", v.Scalar());
    else if (name == "dp_shard_size") r.set(key, r.text(v, key, "a positive integer"), "plan.dp_shard_size", v.Scalar());
    else if (name == "tp_size" || name == "cp_size") {
      if (positive_int(scalar_of(v, r.at(key), "a positive integer"), r.at(key)) != 1)
        r.at(key).fail("tensor and context parallelism are not modelled (must be 1)");
      r.echo(key, v.Scalar(), "checked");
    } else if (name == "sp_backend") {
      if (r.text(v, key, "deepspeed") != "deepspeed")
        r.at(key).fail(fmt::format("must be deepspeed (got '{}'; parallelism_config.py:324-326)", v.Scalar()));
      r.echo(key, v.Scalar(), "checked");
    } else if (name == "sp_seq_length") {
      if (v.IsNull() || (v.IsScalar() && v.Scalar() == "None")) r.echo(key, "None", "not used");
      else r.set(key, r.text(v, key, "a positive integer"), "plan.seq_len", v.Scalar());
    } else if (name == "sp_attn_implementation") {
      const std::string t = r.text(v, key, "sdpa, flash_attention_2 or flash_attention_3");
      if (t == "eager" || t == "flex_attention")
        r.at(key).fail(fmt::format("Accelerate 1.15 refuses '{}' for sequence parallelism (utils/dataclasses.py:2296-2302)", t));
      if (t != "sdpa" && t != "flash_attention_2" && t != "flash_attention_3")
        r.at(key).fail(fmt::format("must be sdpa, flash_attention_2 or flash_attention_3 (got '{}'; hub kernels are not modelled)", t));
      r.set(key, t, "plan.attn_implementation", t);
    } else r.unused(key, v);
  }
  // Accelerate's defaults for the sizes it leaves out (commands/launch.py:908, 915, 951, 980)
  const std::pair<const char*, const char*> sizes[] = {{"dp_replicate_size", "908"}, {"dp_shard_size", "915"}, {"sp_size", "951"}};
  for (const auto& [name, line] : sizes)
    if (!find(items, std::string(kPrefix) + name))
      r.set(std::string("parallelism_config.") + kPrefix + name, "(absent)", std::string("plan.") + name, "1",
            fmt::format("Accelerate default (commands/launch.py:{})", line));
  if (r.scenario().plan.sp_size > 1 && !find(items, std::string(kPrefix) + "sp_attn_implementation"))
    r.set(std::string("parallelism_config.") + kPrefix + "sp_attn_implementation", "(absent)", "plan.attn_implementation",
          "sdpa", "Accelerate default (commands/launch.py:980)");
}

}  // namespace

std::string read_accelerate(Scenario& sc, RunConfigRead& rc, const std::string& path) {
  Reader r(sc, rc, path);
  const YAML::Node root = load_file(path);
  const auto items = map_items(root, Where{path, "", r.dir()});
  const YAML::Node* dt = find(items, "distributed_type");
  if (dt == nullptr) r.at("distributed_type").fail("missing required key (commands/config/config_args.py:109-110)");
  const std::string type = r.text(*dt, "distributed_type", "an Accelerate DistributedType");
  if (type != "DEEPSPEED")
    r.at("distributed_type").fail(contains(kDistributedTypes, type)
                                      ? fmt::format("ulysses plans DeepSpeed runs: must be DEEPSPEED (got {})", type)
                                      : fmt::format("unknown DistributedType '{}' (Accelerate 1.15: utils/dataclasses.py:625-638)", type));
  r.echo("distributed_type", type, "checked");

  std::int64_t machines = 0;
  const YAML::Node* pc = nullptr;
  const YAML::Node* mixed = nullptr;
  for (const auto& [k, v] : items) {
    if (k == "distributed_type" || k == "deepspeed_config") continue;
    if (k == "compute_environment") {
      const std::string t = r.text(v, k, "LOCAL_MACHINE");
      if (t == "AMAZON_SAGEMAKER") r.at(k).fail("SageMaker configs are not supported (LOCAL_MACHINE only)");
      if (t != "LOCAL_MACHINE") r.at(k).fail(fmt::format("must be LOCAL_MACHINE or AMAZON_SAGEMAKER (got '{}')", t));
      r.echo(k, t, "checked");
    } else if (k == "num_processes") {
      const std::int64_t n = parse_int(scalar_of(v, r.at(k), "a positive integer"), r.at(k), -1,
                                            kMaxGpus, "a positive integer, or -1 (set at launch)");
      if (n == 0) r.at(k).fail("must be a positive integer, or -1 (set at launch) (got 0)");
      if (n < 0) {
        r.echo(k, v.Scalar(), "set at launch: gpus left as they are");
        continue;
      }
      r.set(k, v.Scalar(), "gpus", v.Scalar());
      rc.num_processes = n;
    } else if (k == "num_machines") {
      machines = positive_int(scalar_of(v, r.at(k), "a positive integer"), r.at(k));
    } else if (k == "mixed_precision") {
      mixed = &v;
    } else if (k == "parallelism_config") {
      pc = &v;
    } else {
      r.unused(k, v);
    }
  }
  const std::string json = read_deepspeed_section(r, find(items, "deepspeed_config"));

  if (mixed != nullptr && !mixed->IsNull()) {
    const std::string t = r.text(*mixed, "mixed_precision", "no, fp16, bf16 or fp8");
    if (!json.empty())
      r.at("mixed_precision").fail("Accelerate 1.15 refuses it next to deepspeed_config_file (commands/launch.py:1394-1397, "
                                   "utils/dataclasses.py:1507-1532): set bf16 in the DeepSpeed JSON");
    if (t != "bf16")
      r.at("mixed_precision").fail(fmt::format("the model plans bf16 training (got '{}')", t));
    r.echo("mixed_precision", t, "checked");
  } else if (json.empty() || mixed != nullptr) {
    r.echo("mixed_precision", mixed != nullptr ? "null" : "(absent)",
           "accelerate launch --mixed_precision decides; the model assumes bf16");
  }

  if (pc != nullptr && !pc->IsNull()) {
    read_parallelism(r, *pc);
  } else {
    if (pc != nullptr) r.echo("parallelism_config", "null", "none");
    if (rc.num_processes > 0)  // ParallelismConfig may be built in the script: the GPUs sp and dp_replicate leave
      r.set("parallelism_config", "(absent)", "plan.dp_shard_size", "auto", "gpus / (sp_size * dp_replicate_size)");
  }

  if (machines > 0) {
    if (rc.num_processes <= 0) {
      r.echo("num_machines", std::to_string(machines), "not used (num_processes not given)");
    } else {
      if (rc.num_processes % machines != 0)
        r.at("num_machines").fail(fmt::format("must divide num_processes ({}): Accelerate starts num_processes / "
                                              "num_machines per node", rc.num_processes));
      const std::int64_t per_node = rc.num_processes / machines;
      const std::int64_t profile_gpn = resolved_gpus_per_node(sc);
      if (machines == 1 && per_node <= profile_gpn)  // one node holds them all: the node keeps its GPU count
        r.echo("num_machines", "1", fmt::format("checked: one node of {} GPUs holds the {} processes", profile_gpn, per_node));
      else
        r.set("num_machines", std::to_string(machines), "gpus_per_node", std::to_string(per_node), "num_processes / num_machines");
    }
  }
  return json;
}

}  // namespace ulysses
