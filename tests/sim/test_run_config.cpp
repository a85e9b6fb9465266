// Run configs in (sim/run_config.hpp): the Accelerate YAML + DeepSpeed JSON pairs of
// tests/data/run_configs, precedence and defaults, and one InputError naming file and key for
// every unsupported or inconsistent value.
#include <catch2/catch.hpp>

#include <fstream>

#include "sim/run_config.hpp"
#include "tests/cli/run_cli.hpp"
#include "tests/sim/fixtures.hpp"

using namespace ulysses;
using ulysses::test::source_path;
using ulysses::test::TempDir;

namespace {

Scenario base() {
  Scenario sc;
  sc.name = "t";
  sc.model = test::llama31_8b();
  sc.hw = test::h100_sxm();
  sc.gpus = 1;
  return sc;
}

void write(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

const RunConfigKey* entry(const RunConfigRead& rc, const std::string& key) {
  for (const auto& k : rc.keys)
    if (k.key == key) return &k;
  return nullptr;
}

const char* kYaml = "compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\nnum_machines: 1\nnum_processes: 8\n";
const char* kDsOk = R"({"bf16": {"enabled": true}, "zero_optimization": {"stage": 3}, "train_micro_batch_size_per_gpu": 1})";

// The InputError of reading (yaml, json) written into a fresh folder: "file: key: rule".
struct Err {
  std::string file, key, what;
};
Err error_of(const std::string& yaml, const std::string& json) {
  TempDir d;
  const std::string y = d / "acc.yaml", j = d / "ds.json";
  if (!yaml.empty()) write(y, yaml);
  if (!json.empty()) write(j, json);
  Scenario sc = base();
  try {
    apply_run_configs(sc, yaml.empty() ? "" : y, json.empty() ? "" : j);
  } catch (const core::InputError& e) {
    const std::string f = e.file();
    return {f.substr(f.rfind('/') + 1), e.key(), e.what()};
  }
  return {"", "", "no error"};
}

}  // namespace

TEST_CASE("the ALST example pair sets gpus, layout and ZeRO keys, and lists the keys it does not use", "[run_config]") {
  Scenario sc = base();
  const auto rc = apply_run_configs(sc, source_path("tests/data/run_configs/alst-sp8.accelerate-config.yml"), "");
  CHECK(sc.gpus == 8);
  CHECK(sc.gpus_per_node == 0);  // num_machines 1: the profile's node (8 GPUs) holds the 8 processes
  CHECK(sc.plan.sp_size == 8);
  CHECK(sc.plan.dp_replicate_size == 1);
  CHECK(sc.plan.dp_shard_size == 1);
  CHECK(sc.plan.zero_stage == 3);
  CHECK(sc.plan.offload_optimizer);
  CHECK_FALSE(sc.plan.offload_params);
  CHECK(sc.plan.attn_implementation == "flash_attention_2");
  CHECK(sc.plan.micro_batch_size == 1);
  CHECK(sc.plan.reduce_bucket_size == Approx(4096.0 * 4096.0));  // "auto": hidden^2
  CHECK(rc.ds_file.find("alst-sp8.ds-config.json") != std::string::npos);
  REQUIRE(entry(rc, "zero_optimization.overlap_comm") != nullptr);
  CHECK(entry(rc, "zero_optimization.overlap_comm")->note == "not used");
  CHECK(entry(rc, "zero_optimization.overlap_comm")->target.empty());
  REQUIRE(entry(rc, "num_processes") != nullptr);
  CHECK(entry(rc, "num_processes")->target == "gpus");
  CHECK(entry(rc, "tpu_use_sudo") != nullptr);  // unknown to the plan: listed, not refused
}

TEST_CASE("without parallelism_config the GPUs sp and dp_replicate leave form dp_shard, auto leaves keys as they are", "[run_config]") {
  Scenario sc = base();
  sc.plan.micro_batch_size = 2;
  sc.plan.torch_adam = true;
  const auto rc = apply_run_configs(sc, source_path("tests/data/run_configs/sp-alst.accelerate-config.yml"), "");
  CHECK(sc.gpus == 4);
  CHECK(sc.plan.sp_size == 1);
  CHECK(sc.plan.dp_shard_size == 4);
  CHECK(sc.plan.zero_stage == 3);
  CHECK(sc.plan.micro_batch_size == 2);  // "auto": the dataloader's
  CHECK(sc.plan.torch_adam);             // no optimizer section: the script's
  CHECK(entry(rc, "train_micro_batch_size_per_gpu")->note.find("auto") == 0);
}

TEST_CASE("precedence: Accelerate defaults, then the DeepSpeed JSON, which marks what it overrides", "[run_config]") {
  TempDir d;
  write(d / "acc.yaml", std::string(kYaml) + "deepspeed_config:\n  zero_stage: 1\n  offload_optimizer_device: cpu\n");
  write(d / "ds.json", kDsOk);
  Scenario sc = base();
  apply_run_configs(sc, d / "acc.yaml", "");
  CHECK(sc.plan.zero_stage == 1);
  CHECK(sc.plan.offload_optimizer);
  Scenario sd = base();
  write(d / "acc2.yaml", kYaml);  // no deepspeed_config: Accelerate's zero_stage 2, no offload
  apply_run_configs(sd, d / "acc2.yaml", "");
  CHECK(sd.plan.zero_stage == 2);
  CHECK_FALSE(sd.plan.offload_optimizer);
  Scenario se = base();
  const auto rc = apply_run_configs(se, d / "acc.yaml", d / "ds.json");
  CHECK(se.plan.zero_stage == 3);
  CHECK_FALSE(se.plan.offload_optimizer);  // the JSON has no offload: DeepSpeed's none
  CHECK(entry(rc, "deepspeed_config.zero_stage")->note.find("overridden by") != std::string::npos);
}

TEST_CASE("DeepSpeed's batch rule is checked with the world size and sp of the configs", "[run_config]") {
  TempDir d;
  write(d / "acc.yaml", kYaml);
  write(d / "ds.json", R"({"bf16": {"enabled": true}, "zero_optimization": {"stage": 3}, "sequence_parallel_size": 4,
      "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 3, "train_batch_size": 12})");
  Scenario sc = base();
  auto rc = apply_run_configs(sc, d / "acc.yaml", d / "ds.json");
  CHECK(sc.plan.sp_size == 4);
  CHECK(sc.plan.dp_shard_size == 2);
  check_run_configs(rc, sc);  // 2 * 3 * (8 / 4) = 12
  write(d / "ds.json", R"({"bf16": {"enabled": true}, "zero_optimization": {"stage": 3}, "sequence_parallel_size": 4,
      "train_micro_batch_size_per_gpu": 2, "train_batch_size": 8})");
  Scenario s2 = base();
  rc = apply_run_configs(s2, d / "acc.yaml", d / "ds.json");
  try {
    check_run_configs(rc, s2);
    FAIL("no error");
  } catch (const core::InputError& e) {
    CHECK(e.key() == "train_batch_size");
    CHECK(std::string(e.what()).find("= 4 (got 8") != std::string::npos);
  }
}

TEST_CASE("bad run configs: one error naming file and key", "[run_config]") {
  const std::string y = kYaml;
  const std::string ds_ok = kDsOk;
  const std::string with_file = y + "deepspeed_config:\n  deepspeed_config_file: ds.json\n";
  struct Case {
    std::string yaml, json, file, key;
  };
  const std::vector<Case> cases = {
      {"", R"({"bf16": {"enabled": true}, "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "nvme"}}})", "ds.json",
       "zero_optimization.offload_optimizer.device"},
      {"", R"({"fp16": {"enabled": true}, "zero_optimization": {"stage": 2}})", "ds.json", "fp16.enabled"},
      {"", R"({"bf16": {"enabled": false}, "zero_optimization": {"stage": 2}})", "ds.json", "bf16.enabled"},
      {"", R"({"bf16": {"enabled": true}, "zero_optimization": {"stage": 4}})", "ds.json", "zero_optimization.stage"},
      {"", R"({"bf16": {"enabled": true}})", "ds.json", "zero_optimization"},
      {"", R"({"bf16": {"enabled": true}, "zero_optimization": {"stage": 3}, "optimizer": {"type": "Lamb"}})", "ds.json", "optimizer.type"},
      {"", R"({"bf16": {"enabled": true}, "zero_optimization": {"stage": 3}, "train_batch_size": "8"})", "ds.json", "train_batch_size"},
      {"", "{\"bf16\": {\"enabled\": true},", "ds.json", "line "},  // a syntax error: "line L, column C"
      {y + "parallelism_config:\n  parallelism_config_sp_size: 2\n  parallelism_config_sp_backend: torch\n", "", "acc.yaml",
       "parallelism_config.parallelism_config_sp_backend"},
      {y + "parallelism_config:\n  parallelism_config_tp_size: 2\n", "", "acc.yaml", "parallelism_config.parallelism_config_tp_size"},
      {y + "parallelism_config:\n  parallelism_config_sp_size: 2\n  parallelism_config_sp_attn_implementation: eager\n", "",
       "acc.yaml", "parallelism_config.parallelism_config_sp_attn_implementation"},
      {"compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nnum_processes: 8\n", "", "acc.yaml", "distributed_type"},
      {"distributed_type: DEEPSPEEDX\n", "", "acc.yaml", "distributed_type"},
      {"num_processes: 8\n", "", "acc.yaml", "distributed_type"},
      {"distributed_type: DEEPSPEED\ncompute_environment: AMAZON_SAGEMAKER\n", "", "acc.yaml", "compute_environment"},
      // 8 processes, sp 2, dp_shard 1 (Accelerate's default): the ranks do not add up
      {y + "parallelism_config:\n  parallelism_config_sp_size: 2\n", "", "acc.yaml", "num_processes"},
      {"distributed_type: DEEPSPEED\nnum_processes: 6\nparallelism_config:\n  parallelism_config_sp_size: 4\n  "
       "parallelism_config_dp_shard_size: 1\n", "", "acc.yaml", "num_processes"},
      {"distributed_type: DEEPSPEED\nnum_processes: 8\nnum_machines: 3\n", "", "acc.yaml", "num_machines"},

      {y + "mixed_precision: fp16\n", "", "acc.yaml", "mixed_precision"},
      {with_file + "  zero_stage: 3\n", ds_ok, "acc.yaml", "deepspeed_config.zero_stage"},
      {with_file + "mixed_precision: bf16\n", ds_ok, "acc.yaml", "mixed_precision"},
      {y + "deepspeed_config:\n  deepspeed_config_file: missing.json\n", "", "acc.yaml", "deepspeed_config.deepspeed_config_file"},
      {y + "deepspeed_config:\n  offload_param_device: nvme\n", "", "acc.yaml", "deepspeed_config.offload_param_device"},
      {y + "parallelism_config:\n  parallelism_config_sp_size: 8\n",
       R"({"bf16": {"enabled": true}, "zero_optimization": {"stage": 3}, "sequence_parallel_size": 4})", "ds.json",
       "sequence_parallel_size"},
  };
  for (const auto& c : cases) {
    // the JSON of a case with a YAML is read through --deepspeed-config (or the YAML's own file)
    const Err e = error_of(c.yaml, c.json);
    INFO(c.yaml << " | " << c.json << " -> " << e.what);
    CHECK(e.file == c.file);
    if (c.key == "line ") CHECK(e.key.rfind("line ", 0) == 0);
    else CHECK(e.key == c.key);
    CHECK(e.what.find('\n') == std::string::npos);
  }
}

TEST_CASE("num_machines: num_processes / num_machines per node, unless one node of the profile holds them all", "[run_config]") {
  TempDir d;
  write(d / "two.yaml", "distributed_type: DEEPSPEED\nnum_processes: 16\nnum_machines: 4\n");
  Scenario sc = base();
  apply_run_configs(sc, d / "two.yaml", "");
  CHECK(sc.gpus == 16);
  CHECK(sc.gpus_per_node == 4);
  write(d / "one.yaml", "distributed_type: DEEPSPEED\nnum_processes: 16\nnum_machines: 1\n");  // more than the profile's 8
  Scenario s1 = base();
  apply_run_configs(s1, d / "one.yaml", "");
  CHECK(s1.gpus_per_node == 16);
}
