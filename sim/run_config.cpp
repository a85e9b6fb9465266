// Run configs in (sim/run_config.hpp): shared parts, the order of reading, and the checks across
// files. The readers: sim/run_config_accelerate.cpp, sim/run_config_deepspeed.cpp.
#include "sim/run_config.hpp"
#include "sim/fs_query.hpp"

#include <filesystem>

#include <fmt/format.h>

#include "sim/run_config_internal.hpp"

namespace ulysses {

namespace {

std::string shown(const YAML::Node& n) {
  if (n.IsScalar()) return n.Scalar();
  if (n.IsMap()) return "{...}";
  if (n.IsSequence()) return "[...]";
  return "null";
}

}  // namespace

void Reader::set(const std::string& key, const std::string& value, const std::string& target, const std::string& text,
                 const std::string& note) {
  mark_overridden(rc_, target, file_ + ": " + key);
  set_scalar(sc_, target, Scalar{text, false}, at(key));
  rc_.keys.push_back({file_, key, value, target, text, note});
}

void Reader::echo(const std::string& key, const std::string& value, const std::string& note) {
  rc_.keys.push_back({file_, key, value, "", "", note});
}

void Reader::unused(const std::string& key, const YAML::Node& n, int depth) {
  if (n.IsMap() && depth < 4) {
    for (auto it = n.begin(); it != n.end(); ++it)
      unused(key + "." + (it->first.IsScalar() ? it->first.Scalar() : std::string("?")), it->second, depth + 1);
    if (n.size() > 0) return;
  }
  echo(key, shown(n), "not used");
}

std::string Reader::text(const YAML::Node& n, const std::string& key, const std::string& expected) const {
  return scalar_of(n, at(key), expected).text;
}

bool is_auto(const YAML::Node& n) { return n.IsScalar() && n.Scalar() == "auto"; }

void mark_overridden(RunConfigRead& rc, const std::string& target, const std::string& by) {
  for (auto& k : rc.keys) {
    if (k.target != target || k.note.find("overridden by") != std::string::npos) continue;
    k.note = k.note.empty() ? "overridden by " + by : k.note + "; overridden by " + by;
  }
}

RunConfigRead apply_run_configs(Scenario& sc, const std::string& accelerate_yaml, const std::string& deepspeed_json) {
  namespace fs = std::filesystem;
  RunConfigRead rc;
  std::string named;  // the DeepSpeed JSON the YAML names
  if (!accelerate_yaml.empty()) named = read_accelerate(sc, rc, accelerate_yaml);
  std::string json = deepspeed_json;
  if (!deepspeed_json.empty() && !named.empty()) {
    if (!path_exists(deepspeed_json)) read_text(deepspeed_json);  // the one-line "cannot be read"
    std::error_code ec;
    if (!fs::equivalent(deepspeed_json, named, ec))
      throw core::InputError("", "--deepspeed-config",
                       fmt::format("'{}' is not the DeepSpeed config that {} names ('{}'): give one of them",
                                   deepspeed_json, accelerate_yaml, named));
  }
  if (json.empty()) json = named;
  if (!json.empty()) {
    read_deepspeed(sc, rc, json);
    rc.ds_file = json;
  }
  // The layout the YAML launches: Accelerate's data_parallel_size (dp_replicate * dp_shard) and
  // DeepSpeed's data-parallel world (num_processes / sp) must be the same ranks.
  if (rc.num_processes > 0) {
    const Plan& p = sc.plan;
    const Where w{accelerate_yaml, "num_processes", ""};
    if (p.dp_shard_auto && rc.num_processes % (p.sp_size * p.dp_replicate_size) != 0)
      w.fail(fmt::format("must be divisible by sp_size * dp_replicate_size ({} * {})", p.sp_size, p.dp_replicate_size));
    if (!p.dp_shard_auto && p.dp_replicate_size * p.dp_shard_size * p.sp_size != rc.num_processes)
      w.fail(fmt::format("must equal dp_replicate_size * dp_shard_size * sp_size = {} * {} * {} = {} (Accelerate's "
                         "data-parallel size and DeepSpeed's world / sp must agree)",
                         p.dp_replicate_size, p.dp_shard_size, p.sp_size,
                         p.dp_replicate_size * p.dp_shard_size * p.sp_size));
  }
  return rc;
}

void check_run_configs(const RunConfigRead& rc, const Scenario& sc) {
  if (rc.train_batch_size <= 0) return;
  const std::int64_t world = rc.num_processes > 0 ? rc.num_processes : sc.gpus;
  const std::int64_t sp = rc.sp_size > 0 ? rc.sp_size : sc.plan.sp_size;
  const std::int64_t micro = rc.micro_batch_size > 0 ? rc.micro_batch_size : sc.plan.micro_batch_size;
  const std::int64_t gas = rc.grad_accum > 0 ? rc.grad_accum : 1;
  const Where w{rc.ds_file, "train_batch_size", ""};
  if (sp <= 0 || world % sp != 0)
    w.fail(fmt::format("needs the world size ({}) to be a multiple of sp_size ({})", world, sp));
  const std::int64_t want = micro * gas * (world / sp);
  if (rc.train_batch_size != want)
    w.fail(fmt::format("must equal train_micro_batch_size_per_gpu * gradient_accumulation_steps * (world / sp_size) "
                       "= {} * {} * ({} / {}) = {} (got {}; DeepSpeed runtime/config.py:590-605)",
                       micro, gas, world, sp, want, rc.train_batch_size));
}

void throw_if_from_run_config(const core::InputError& e, const RunConfigRead& rc) {
  for (auto it = rc.keys.rbegin(); it != rc.keys.rend(); ++it)
    if (it->target == e.key() && it->note.find("overridden by") == std::string::npos)
      throw core::InputError(it->file, it->key + " (" + e.key() + ")", e.rule());
}

}  // namespace ulysses
