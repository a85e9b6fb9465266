// Scenario files (scenarios/*.yaml), set_key and to_yaml. Format: docs/INPUTS.md.
#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "core/attn_impls.hpp"
#include "sim/config.hpp"
#include "sim/fs_query.hpp"
#include "sim/config_internal.hpp"
#include "sim/tokens.hpp"

namespace ulysses {

namespace {

struct PlanField {
  const char* key;
  void (*set)(Plan&, const Scalar&, const Where&);
  std::string (*get)(const Plan&);
};

std::string b2s(bool b) { return b ? "true" : "false"; }

const std::vector<PlanField>& plan_fields() {
  using S = Scalar;
  using W = Where;
  static const std::vector<PlanField> fields = {
      {"sp_size", [](Plan& p, const S& s, const W& w) { p.sp_size = positive_int(s, w); },
       [](const Plan& p) { return std::to_string(p.sp_size); }},
      {"dp_replicate_size", [](Plan& p, const S& s, const W& w) { p.dp_replicate_size = positive_int(s, w); },
       [](const Plan& p) { return std::to_string(p.dp_replicate_size); }},
      {"dp_shard_size",
       [](Plan& p, const S& s, const W& w) {
         p.dp_shard_auto = !s.quoted && s.text == "auto";
         if (!p.dp_shard_auto) p.dp_shard_size = parse_int(s, w, 1, INT64_MAX, "a positive integer or auto");
       },
       [](const Plan& p) { return p.dp_shard_auto ? std::string("auto") : std::to_string(p.dp_shard_size); }},
      {"zero_stage", [](Plan& p, const S& s, const W& w) { p.zero_stage = static_cast<int>(parse_int(s, w, 0, 3, "0, 1, 2 or 3")); },
       [](const Plan& p) { return std::to_string(p.zero_stage); }},
      {"offload_optimizer", [](Plan& p, const S& s, const W& w) { p.offload_optimizer = parse_bool(s, w); },
       [](const Plan& p) { return b2s(p.offload_optimizer); }},
      {"offload_params", [](Plan& p, const S& s, const W& w) { p.offload_params = parse_bool(s, w); },
       [](const Plan& p) { return b2s(p.offload_params); }},
      {"activation_checkpointing", [](Plan& p, const S& s, const W& w) { p.activation_checkpointing = parse_bool(s, w); },
       [](const Plan& p) { return b2s(p.activation_checkpointing); }},
      {"offload_checkpoints", [](Plan& p, const S& s, const W& w) { p.offload_checkpoints = parse_bool(s, w); },
       [](const Plan& p) { return b2s(p.offload_checkpoints); }},
      {"tiled_logits", [](Plan& p, const S& s, const W& w) { p.tiled_logits = parse_bool(s, w); },
       [](const Plan& p) { return b2s(p.tiled_logits); }},
      {"tiled_mlp", [](Plan& p, const S& s, const W& w) { p.tiled_mlp = parse_bool(s, w); },
       [](const Plan& p) { return b2s(p.tiled_mlp); }},
      {"attn_implementation",
       [](Plan& p, const S& s, const W& w) { p.attn_implementation = parse_choice(s, w, attn_implementations()); },
       [](const Plan& p) { return p.attn_implementation; }},
      {"micro_batch_size", [](Plan& p, const S& s, const W& w) { p.micro_batch_size = positive_int(s, w); },
       [](const Plan& p) { return std::to_string(p.micro_batch_size); }},
      {"seq_len",  // a token count: 131072, 128K, 1M, 128Ki (sim/tokens.hpp); a quoted value is a string
       [](Plan& p, const S& s, const W& w) { p.seq_len = s.quoted ? positive_int(s, w) : parse_tokens(s.text, w.file, w.key); },
       [](const Plan& p) { return std::to_string(p.seq_len); }},
      {"pad_to_multiple_of", [](Plan& p, const S& s, const W& w) { p.pad_to_multiple_of = nonneg_int(s, w); },
       [](const Plan& p) { return std::to_string(p.pad_to_multiple_of); }},
      {"kv_strategy",
       [](Plan& p, const S& s, const W& w) {
         p.kv_strategy = parse_choice(s, w, {"replicate", "send_once"}) == "replicate" ? KvStrategy::replicate
                                                                                          : KvStrategy::send_once;
       },
       [](const Plan& p) { return std::string(p.kv_strategy == KvStrategy::replicate ? "replicate" : "send_once"); }},
      {"reduce_bucket_size", [](Plan& p, const S& s, const W& w) { p.reduce_bucket_size = positive_number(s, w); },
       [](const Plan& p) { return number(p.reduce_bucket_size); }},
      {"rmsnorm_implementation",
       [](Plan& p, const S& s, const W& w) {
         p.rmsnorm_implementation = parse_choice(s, w, {"eager", "fused"}) == "eager" ? RmsNormImpl::eager : RmsNormImpl::fused;
       },
       [](const Plan& p) { return std::string(p.rmsnorm_implementation == RmsNormImpl::eager ? "eager" : "fused"); }},
      {"torch_adam", [](Plan& p, const S& s, const W& w) { p.torch_adam = parse_bool(s, w); },
       [](const Plan& p) { return b2s(p.torch_adam); }},
      {"expandable_segments", [](Plan& p, const S& s, const W& w) { p.expandable_segments = parse_bool(s, w); },
       [](const Plan& p) { return b2s(p.expandable_segments); }},
      {"runtime",
       [](Plan& p, const S& s, const W& w) {
         p.runtime = parse_choice(s, w, {"pytorch", "ulysses"}) == "pytorch" ? Runtime::pytorch : Runtime::ulysses;
       },
       [](const Plan& p) { return std::string(p.runtime == Runtime::pytorch ? "pytorch" : "ulysses"); }},
  };
  return fields;
}

const std::vector<std::string>& plan_keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> k;
    for (const auto& f : plan_fields()) k.push_back(f.key);
    return k;
  }();
  return keys;
}

const std::vector<std::string> kTopKeys = {"name", "model", "profile", "gpus", "gpus_per_node", "host_mem_GiB", "plan", "workload"};
const std::vector<std::string> kTopRequired = {"model", "profile", "gpus", "plan"};
const std::vector<std::string> kPlanRequired = {"sp_size", "seq_len"};
const std::vector<std::string> kWorkloadKeys = {"causal"};

// dp_shard_size: auto -> the GPUs not taken by sp and dp_replicate (0 when they do not divide).
void derive_dp_shard(Scenario& sc) {
  if (!sc.plan.dp_shard_auto) return;
  const std::int64_t taken = sc.plan.sp_size * sc.plan.dp_replicate_size;
  sc.plan.dp_shard_size = (taken > 0 && sc.gpus % taken == 0) ? sc.gpus / taken : 0;
}

}  // namespace

// Every key but model/profile takes a scalar; no YAML node is needed (set_key stays cheap).
void set_scalar(Scenario& sc, const std::string& key, const Scalar& s, const Where& w) {
  const std::size_t dot = key.find('.');
  const std::string head = key.substr(0, dot), rest = dot == std::string::npos ? "" : key.substr(dot + 1);
  bool known = true;
  if (key == "name") sc.name = parse_string(s, w);
  else if (key == "model") sc.model = model_from_ref(s.text, w);
  else if (key == "profile") sc.hw = profile_from_ref(s.text, w);
  else if (key == "gpus") sc.gpus = positive_int(s, w);
  else if (key == "gpus_per_node") sc.gpus_per_node = positive_int(s, w);
  else if (key == "host_mem_GiB") sc.host_ram_bytes = gib_to_bytes(positive_gib(s, w));
  else if (key == "workload.causal") sc.workload.causal = parse_bool(s, w);
  else if (head == "model" && !rest.empty()) known = set_model_field(sc.model, rest, s, w);
  else if (head == "profile" && !rest.empty()) known = set_profile_field(sc.hw, rest, s, w);
  else if (head == "plan" && !rest.empty()) {
    const auto& fields = plan_fields();
    const auto f = std::find_if(fields.begin(), fields.end(), [&](const PlanField& pf) { return rest == pf.key; });
    if (f == fields.end()) known = false;
    else f->set(sc.plan, s, w);
  } else known = false;
  if (!known) {
    const std::string near = closest(key, settable_keys());
    w.fail(near.empty() ? "unknown key (see docs/INPUTS.md for the keys)" : fmt::format("unknown key (did you mean '{}'?)", near));
  }
  if (key == "gpus" || key == "plan.sp_size" || key == "plan.dp_replicate_size" || key == "plan.dp_shard_size")
    derive_dp_shard(sc);
}

void set_value(Scenario& sc, const std::string& key, const YAML::Node& n, const Where& w) {
  if (key == "model" && n.IsMap()) sc.model = model_from_node(n, w);
  else if (key == "profile" && n.IsMap()) sc.hw = profile_from_node(n, w);
  else if (key == "model" || key == "profile") set_scalar(sc, key, scalar_of(n, w, "a " + key + " preset name, a path or a map"), w);
  else set_scalar(sc, key, scalar_of(n, w, "a scalar"), w);
}

Scenario parse_scenario(const YAML::Node& root, const Where& w, const std::string& default_name) {
  const auto items = map_items(root, w);
  reject_unknown(items, kTopKeys, w);
  require_keys(items, kTopRequired, w);
  Scenario sc;
  sc.name = default_name;
  sc.plan.dp_shard_auto = true;  // unless the plan gives dp_shard_size
  for (const auto& [k, v] : items) {
    const Where wk = w.child(k);
    if (k == "plan") {
      const auto plan = map_items(v, wk);
      reject_unknown(plan, plan_keys(), wk);
      require_keys(plan, kPlanRequired, wk);
      for (const auto& [pk, pv] : plan) set_value(sc, "plan." + pk, pv, wk.child(pk));
    } else if (k == "workload") {
      const auto workload = map_items(v, wk);
      reject_unknown(workload, kWorkloadKeys, wk);
      for (const auto& [wk2, wv] : workload) set_value(sc, "workload." + wk2, wv, wk.child(wk2));
    } else {
      set_value(sc, k, v, wk);
    }
  }
  derive_dp_shard(sc);
  return sc;
}

const std::vector<std::string>& settable_keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> k = {"name", "model", "profile", "gpus", "gpus_per_node", "host_mem_GiB"};
    for (const auto& p : plan_keys()) k.push_back("plan." + p);
    k.push_back("workload.causal");
    for (const auto& m : model_keys()) k.push_back("model." + m);
    for (const auto& p : profile_keys()) k.push_back("profile." + p);
    return k;
  }();
  return keys;
}

const std::vector<std::string>& attn_implementations() {
  static const std::vector<std::string> impls = [] {
    std::vector<std::string> v;
    for (const core::AttnImpl& a : core::kAttnImpls)
      if (a.plan_name) v.emplace_back(a.name);
    return v;
  }();
  return impls;
}

Scenario load_scenario(const std::string& path) {
  const YAML::Node root = load_file(path);
  Scenario sc = parse_scenario(root, Where{path, "", dir_of(path)}, stem_of(path));
  validate(sc, path);
  return sc;
}

void set_key(Scenario& sc, const std::string& key, const std::string& value, const std::string& origin) {
  // origin: a file (paths in a model/profile value resolve next to it) or a command-line flag
  // such as "--sp-size". Only model/profile values can be paths, so only they look at the disk.
  const bool is_flag = !origin.empty() && origin[0] == '-';
  const bool may_be_path = key == "model" || key == "profile";
  const bool is_file = may_be_path && !is_flag && !origin.empty() && path_is_file(origin);
  const Where w = is_flag ? Where{"", origin, ""} : Where{origin, key, is_file ? dir_of(origin) : ""};
  if (may_be_path && !value.empty() && value.front() == '{') {  // an inline YAML map
    YAML::Node n;
    try {
      n = YAML::Load(value);
    } catch (const YAML::ParserException& e) {
      w.fail("YAML syntax error in inline map: " + e.msg);
    }
    set_value(sc, key, n, w);
    return;
  }
  set_scalar(sc, key, Scalar{value, false}, w);  // the text as typed: a plain scalar
}

std::string to_yaml(const Scenario& sc) {
  std::string out = "# written by ulysses (to_yaml); format: docs/INPUTS.md\n";
  out += fmt::format("name: {}\n", quote(sc.name));
  out += fmt::format("gpus: {}\n", sc.gpus);
  if (sc.gpus_per_node > 0) out += fmt::format("gpus_per_node: {}\n", sc.gpus_per_node);
  if (sc.host_ram_bytes > 0) out += fmt::format("host_mem_GiB: {}\n", gib_text(sc.host_ram_bytes));
  out += "model:\n" + model_yaml(sc.model, 2);
  out += "profile:\n" + profile_yaml(sc.hw, 2);
  out += "plan:\n";
  for (const auto& f : plan_fields()) out += fmt::format("  {}: {}\n", f.key, f.get(sc.plan));
  out += fmt::format("workload:\n  causal: {}\n", sc.workload.causal ? "true" : "false");
  return out;
}

}  // namespace ulysses
