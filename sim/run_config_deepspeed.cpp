// Reads a DeepSpeed 0.19 config JSON (runtime/config.py, runtime/zero/config.py, offload_config.py,
// precision_config.py) into scenario keys. JSON is read with yaml-cpp (JSON is YAML flow syntax),
// so errors and the scalar rules are the YAML loaders'. Sources: docs/INPUTS.md "Run configs".
#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "sim/run_config_internal.hpp"

namespace ulysses {

namespace {

const YAML::Node* find(const std::vector<std::pair<std::string, YAML::Node>>& items, const std::string& k) {
  for (const auto& kv : items)
    if (kv.first == k) return &kv.second;
  return nullptr;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// A positive integer, or "auto" (returns 0).
std::int64_t int_or_auto(Reader& r, const YAML::Node& n, const std::string& key) {
  if (is_auto(n)) return 0;
  return positive_int(scalar_of(n, r.at(key), "a positive integer or \"auto\""), r.at(key));
}

// true | false | "auto" (returns "auto")
std::string bool_or_auto(Reader& r, const YAML::Node& n, const std::string& key) {
  if (is_auto(n)) return "auto";
  return parse_bool(scalar_of(n, r.at(key), "true, false or \"auto\""), r.at(key)) ? "true" : "false";
}

// zero_optimization.offload_optimizer / offload_param: {device: none|cpu|nvme, ...}
void read_offload(Reader& r, const YAML::Node& n, const std::string& key, const std::string& target) {
  if (n.IsNull()) {
    r.set(key, "null", target, "false", "no offload");
    return;
  }
  const auto items = map_items(n, r.at(key));
  bool device = false;
  for (const auto& [k, v] : items) {
    const std::string kk = key + "." + k;
    if (k != "device") {
      r.unused(kk, v);
      continue;
    }
    device = true;
    const std::string t = r.text(v, kk, "none, cpu or nvme");
    if (t == "nvme") r.at(kk).fail("NVMe offload is not modelled (use cpu or none)");
    if (t != "cpu" && t != "none") r.at(kk).fail(fmt::format("must be none, cpu or nvme (got '{}'; zero/offload_config.py:14-18)", t));
    r.set(kk, t, target, t == "cpu" ? "true" : "false");
  }
  if (!device) r.set(key + ".device", "(absent)", target, "false", "DeepSpeed default none (zero/offload_config.py:24, 58)");
}

void read_zero(Reader& r, const YAML::Node& z) {
  const std::string key = "zero_optimization";
  if (z.IsScalar() && (z.Scalar() == "true" || z.Scalar() == "false")) {  // the legacy boolean (zero/config.py:60-78)
    r.set(key, z.Scalar(), "plan.zero_stage", z.Scalar() == "true" ? "1" : "0", "legacy boolean form (zero/config.py:60-78)");
    r.set(key + ".offload_optimizer", "(absent)", "plan.offload_optimizer", "false", "DeepSpeed default");
    r.set(key + ".offload_param", "(absent)", "plan.offload_params", "false", "DeepSpeed default");
    r.set(key + ".reduce_bucket_size", "(absent)", "plan.reduce_bucket_size", "5e8", "DeepSpeed default (zero/config.py:113)");
    return;
  }
  const auto items = map_items(z, r.at(key));
  const Plan& p = r.scenario().plan;
  for (const auto& [k, v] : items) {
    const std::string kk = key + "." + k;
    if (k == "stage") {
      if (is_auto(v)) r.echo(kk, "auto", fmt::format("auto: from Accelerate; plan.zero_stage left at {}", p.zero_stage));
      else r.set(kk, r.text(v, kk, "0, 1, 2 or 3"), "plan.zero_stage", v.Scalar());
    } else if (k == "offload_optimizer") {
      read_offload(r, v, kk, "plan.offload_optimizer");
    } else if (k == "offload_param") {
      read_offload(r, v, kk, "plan.offload_params");
    } else if (k == "cpu_offload" || k == "cpu_offload_param") {  // deprecated aliases (zero/config.py:188-220)
      const bool on = parse_bool(scalar_of(v, r.at(kk), "true or false"), r.at(kk));
      r.set(kk, v.Scalar(), k == "cpu_offload" ? "plan.offload_optimizer" : "plan.offload_params", on ? "true" : "false",
            "deprecated alias (zero/config.py:188-220)");
    } else if (k == "reduce_bucket_size") {
      if (is_auto(v)) {
        const auto h = r.scenario().model.hidden;
        r.set(kk, "auto", "plan.reduce_bucket_size", std::to_string(h * h), "auto: hidden^2 (Accelerate accelerator.py:2296-2327)");
      } else {
        r.set(kk, r.text(v, kk, "a positive number"), "plan.reduce_bucket_size", v.Scalar());
      }
    } else {
      r.unused(kk, v);
    }
  }
  if (!find(items, "stage")) r.set(key + ".stage", "(absent)", "plan.zero_stage", "0", "DeepSpeed default (zero/config.py:95)");
  if (!find(items, "offload_optimizer") && !find(items, "cpu_offload"))
    r.set(key + ".offload_optimizer", "(absent)", "plan.offload_optimizer", "false", "DeepSpeed default (zero/config.py:171)");
  if (!find(items, "offload_param") && !find(items, "cpu_offload_param"))
    r.set(key + ".offload_param", "(absent)", "plan.offload_params", "false", "DeepSpeed default (zero/config.py:164)");
  if (!find(items, "reduce_bucket_size"))
    r.set(key + ".reduce_bucket_size", "(absent)", "plan.reduce_bucket_size", "5e8", "DeepSpeed default (zero/config.py:113)");
}

// bf16 (or bfloat16) and fp16: the model plans bf16 (docs/MODEL.md); fp16 and fp32 are refused.
void read_precision(Reader& r, const std::vector<std::pair<std::string, YAML::Node>>& items) {
  const YAML::Node* bf16 = find(items, "bf16");
  std::string bkey = "bf16";
  if (bf16 == nullptr && (bf16 = find(items, "bfloat16")) != nullptr) bkey = "bfloat16";  // precision_config.py:30-38
  if (const YAML::Node* fp16 = find(items, "fp16")) {
    for (const auto& [k, v] : map_items(*fp16, r.at("fp16"))) {
      const std::string kk = "fp16." + k;
      if (k != "enabled") {
        r.unused(kk, v);
        continue;
      }
      const std::string on = bool_or_auto(r, v, kk);
      if (on == "true") r.at(kk).fail("fp16 training is not modelled: the model plans bf16 (set bf16.enabled true)");
      r.echo(kk, on, on == "auto" ? "auto: from Accelerate's mixed_precision; the model assumes bf16" : "checked");
    }
  }
  if (bf16 == nullptr) {
    r.echo("bf16", "(absent)", "Accelerate's mixed_precision decides; the model assumes bf16");
    return;
  }
  bool enabled = false;
  for (const auto& [k, v] : map_items(*bf16, r.at(bkey))) {
    const std::string kk = bkey + "." + k;
    if (k == "enabled") {
      enabled = true;
      const std::string on = bool_or_auto(r, v, kk);
      if (on == "false") r.at(kk).fail("false trains in fp32 (or fp16), which the model does not plan: it plans bf16");
      r.echo(kk, on, on == "auto" ? "auto: from Accelerate's mixed_precision; the model assumes bf16" : "checked");
    } else if (k == "bf16_master_weights_and_grads" || k == "bf16_optimizer_states") {
      if (bool_or_auto(r, v, kk) == "true")
        r.at(kk).fail("bf16 master weights / optimizer states are not modelled (the model keeps them in fp32)");
      r.echo(kk, v.Scalar(), "checked");
    } else {
      r.unused(kk, v);
    }
  }
  if (!enabled) r.at(bkey + ".enabled").fail("missing: DeepSpeed's default false trains in fp32; the model plans bf16");
}

void read_optimizer(Reader& r, const YAML::Node* opt) {
  const Plan& p = r.scenario().plan;
  if (opt == nullptr) {
    r.echo("optimizer", "(absent)", fmt::format("the training script's optimizer: plan.torch_adam left at {}", p.torch_adam));
    return;
  }
  const auto items = map_items(*opt, r.at("optimizer"));
  for (const auto& [k, v] : items) {
    const std::string kk = "optimizer." + k;
    if (k == "type") {
      const std::string t = r.text(v, kk, "Adam or AdamW");
      if (lower(t) != "adam" && lower(t) != "adamw")  // runtime/config.py:53-54, 519-520 (case-insensitive)
        r.at(kk).fail(fmt::format("only Adam and AdamW are modelled (got '{}')", t));
      r.echo(kk, t, "checked");
    } else if (k == "params") {
      const auto params = map_items(v, r.at(kk));
      for (const auto& [pk, pv] : params) {
        if (pk == "torch_adam") r.set(kk + "." + pk, r.text(pv, kk + "." + pk, "true or false"), "plan.torch_adam", pv.Scalar());
        else r.unused(kk + "." + pk, pv);
      }
      if (!find(params, "torch_adam"))
        r.set(kk + ".torch_adam", "(absent)", "plan.torch_adam", "false", "DeepSpeed default (runtime/engine.py:2378)");
    } else {
      r.unused(kk, v);
    }
  }
  if (!find(items, "params"))
    r.set("optimizer.params.torch_adam", "(absent)", "plan.torch_adam", "false", "DeepSpeed default (runtime/engine.py:2378)");
}

}  // namespace

void read_deepspeed(Scenario& sc, RunConfigRead& rc, const std::string& path) {
  Reader r(sc, rc, path);
  const YAML::Node root = load_file(path);
  const auto items = map_items(root, Where{path, "", r.dir()});
  const YAML::Node* zero = find(items, "zero_optimization");
  if (zero == nullptr)
    r.at("zero_optimization").fail("missing required key (Accelerate 1.15 refuses a DeepSpeed config without it: "
                                   "utils/dataclasses.py:1275-1276)");
  for (const auto& [k, v] : items) {
    if (k == "zero_optimization") {
      read_zero(r, v);
    } else if (k == "train_micro_batch_size_per_gpu") {
      rc.micro_batch_size = int_or_auto(r, v, k);
      if (rc.micro_batch_size == 0)
        r.echo(k, "auto", fmt::format("auto: the dataloader's batch size; plan.micro_batch_size left at {}", sc.plan.micro_batch_size));
      else r.set(k, v.Scalar(), "plan.micro_batch_size", v.Scalar());
    } else if (k == "train_batch_size") {
      rc.train_batch_size = int_or_auto(r, v, k);
      r.echo(k, v.Scalar(), rc.train_batch_size == 0 ? "auto: Accelerate computes it" : "checked: micro * accumulation * (world / sp)");
    } else if (k == "gradient_accumulation_steps") {
      rc.grad_accum = int_or_auto(r, v, k);
      r.echo(k, v.Scalar(), rc.grad_accum == 0 ? "auto: Accelerate's (default 1)" : "checked with train_batch_size");
    } else if (k == "sequence_parallel_size") {
      const std::int64_t sp = positive_int(scalar_of(v, r.at(k), "a positive integer"), r.at(k));
      if (rc.sp_size > 0 && sp != rc.sp_size)
        r.at(k).fail(fmt::format("is {} but the Accelerate YAML's parallelism_config_sp_size is {}: they must agree", sp, rc.sp_size));
      r.set(k, v.Scalar(), "plan.sp_size", v.Scalar());
      rc.sp_size = sp;
    } else if (k != "optimizer" && k != "bf16" && k != "bfloat16" && k != "fp16") {
      r.unused(k, v);
    }
  }
  read_precision(r, items);
  read_optimizer(r, find(items, "optimizer"));
}

}  // namespace ulysses
