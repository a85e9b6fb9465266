#include "cli/options.hpp"

#include <cmath>
#include <cstdio>
#include <iostream>
#include <string_view>

#include <fmt/format.h>

#include "eval/block_run.hpp"
#include "eval/device_match.hpp"
#include "eval/record_in.hpp"
#include "reports/csv.hpp"
#include "reports/file_out.hpp"
#include "sim/config.hpp"
#include "core/errors.hpp"
#include "sim/feature_search.hpp"
#include "sim/run_config.hpp"

namespace ulysses::cli {

namespace {

// One flag per scenario key, applied in this order through set_key(sc, key, value, "--flag").
struct FlagKey {
  const char* flag;
  const char* key;     // dotted key of set_key
  bool is_switch;      // --flag means "true"; --flag=false also accepted
  const char* help;
};

constexpr FlagKey kFlags[] = {
    {"gpus", "gpus", false, "world size (default 1 without --scenario)"},
    {"gpus-per-node", "gpus_per_node", false, "GPUs per node (default: the profile's)"},
    {"host-mem-GiB", "host_mem_GiB", false, "host RAM per node in GiB (default: the profile's)"},
    {"sp-size", "plan.sp_size", false, "Ulysses sequence-parallel size P, or 'auto' (largest that divides the GPUs and the heads)"},
    {"dp-replicate-size", "plan.dp_replicate_size", false, "data-parallel replicas (default 1)"},
    {"dp-shard-size", "plan.dp_shard_size", false, "data-parallel shards (default: gpus / (sp_size * dp_replicate_size))"},
    {"zero-stage", "plan.zero_stage", false, "ZeRO stage 0-3 (default 3)"},
    {"offload-optimizer", "plan.offload_optimizer", true, "optimizer states (fp32 master, Adam moments) on host"},
    {"offload-params", "plan.offload_params", true, "parameters on host (needs ZeRO-3)"},
    {"activation-checkpointing", "plan.activation_checkpointing", true, "one checkpoint per layer (default on)"},
    {"offload-checkpoints", "plan.offload_checkpoints", true, "activation checkpoints on host"},
    {"tiled-logits", "plan.tiled_logits", true, "tiled logits + loss"},
    {"tiled-mlp", "plan.tiled_mlp", true, "TiledMLP (ceil(S_local/h) shards)"},
    {"attn-implementation", "plan.attn_implementation", false, "flash_attention_2 | sdpa | ... (default flash_attention_2)"},
    {"micro-batch-size", "plan.micro_batch_size", false, "B (default 1)"},
    {"seq-len", "plan.seq_len", false, "global sequence length S, a token count: 131072, 128Ki (= 131072), 1M (= 1,000,000)"},
    {"pad-to-multiple-of", "plan.pad_to_multiple_of", false, "pad S up to a multiple of lcm(this, sp_size); 0 = no padding"},
    {"kv-strategy", "plan.kv_strategy", false, "replicate | send_once, when sp_size > kv heads"},
    {"rmsnorm-implementation", "plan.rmsnorm_implementation", false, "eager (HF LlamaRMSNorm, default) | fused (Liger/Apex kernel)"},
    {"runtime", "plan.runtime", false, "pytorch (HF + Accelerate + DeepSpeed, default) | ulysses (this project's CUDA runtime): whose fixed costs"},
    {"torch-adam", "plan.torch_adam", true, "GPU optimizer torch.optim.AdamW (DeepSpeed optimizer.params.torch_adam) instead of FusedAdam"},
    {"expandable-segments", "plan.expandable_segments", true, "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (default true, the ALST recipe; the deepspeed backend runs with it)"},
    {"causal", "workload.causal", true, "causal attention (default on)"},
};

bool given(const po::variables_map& vm, const char* name) { return vm.count(name) && !vm[name].defaulted(); }

std::string str(const po::variables_map& vm, const char* name) { return vm[name].as<std::string>(); }

}  // namespace

void add_format_option(po::options_description& d) {
  d.add_options()("format", po::value<std::string>()->default_value("table"), "output: table | json | csv");
}

Format format_of(const po::variables_map& vm) {
  const std::string f = vm.count("format") ? str(vm, "format") : "table";
  if (f == "table") return Format::table;
  if (f == "json") return Format::json;
  if (f == "csv") return Format::csv;
  throw core::InputError("", "--format", "'" + f + "' is not one of table, json, csv");
}

void add_scenario_options(po::options_description& d) {
  d.add_options()
      ("scenario", po::value<std::string>(), "scenario YAML; the flags below override its keys")
      ("model", po::value<std::string>(), "model preset (scenarios/models/<name>.yaml), YAML path, or Hugging Face config.json (or its folder); required without --scenario")
      ("profile", po::value<std::string>(), "hardware profile (profiles/<name>.yaml) or YAML path (default h100-sxm-80gb without --scenario)")
      ("accelerate-config", po::value<std::string>(), "HF Accelerate config YAML (accelerate launch --config_file): its keys override the scenario's (docs/INPUTS.md \"Run configs\")")
      ("deepspeed-config", po::value<std::string>(), "DeepSpeed config JSON: its keys override the Accelerate YAML's; the flags below override both")
      ("all-features", po::bool_switch(),
       "ZeRO-3 + activation checkpointing and the best set of the feature rungs (tiled_logits, ulysses = "
       "sp auto, tiled_mlp, ckpt_offload, optimizer_offload, param_offload): plan tries every subset and "
       "keeps the longest S (ties: the faster step), at a fixed --seq-len the fastest that fits; a rung "
       "given by its flag or --features is fixed, not searched")
      ("features", po::value<std::string>(),
       "feature rungs to turn on, comma-separated (tiled_logits,ulysses,tiled_mlp,ckpt_offload,"
       "optimizer_offload,param_offload; ulysses = sp auto); explicit flags override them");
  for (const auto& f : kFlags) {
    auto* v = po::value<std::string>();
    if (f.is_switch) v->implicit_value("true");
    d.add_options()(f.flag, v, f.help);
  }
  d.add_options()
      ("no-activation-checkpointing", po::bool_switch(), "same as --activation-checkpointing=false")
      ("no-causal", po::bool_switch(), "same as --causal=false");
}

po::variables_map parse_args(int argc, char** argv, const po::options_description& d,
                             const po::positional_options_description* pos) {
  po::variables_map vm;
  // Boost's error messages substitute placeholders such as %canonical_option% in a loop that never
  // ends when the substituted word holds the placeholder itself (found by fuzz_argv): refuse such words
  for (int i = 1; i < argc; ++i)
    for (const char* token : {"%canonical_option%", "%option%", "%value%", "%prefix_option%", "%original_token%"})
      if (std::string_view(argv[i]).find(token) != std::string_view::npos)
        throw core::InputError("", "arguments", fmt::format("a word may not contain '{}' (argument {})", token, i));
  try {
    po::command_line_parser parser(argc, argv);
    // no prefix guessing (--sp for --sp-size), and a word that is no option is an error unless the
    // command declares positionals
    parser.options(d).style(po::command_line_style::default_style & ~po::command_line_style::allow_guessing);
    const po::positional_options_description none;
    parser.positional(pos ? *pos : none);
    po::store(parser.run(), vm);
    po::notify(vm);
  } catch (const po::error_with_option_name& e) {
    std::string name = e.get_option_name();
    throw core::InputError("", name.empty() ? "arguments" : name, e.what());
  } catch (const po::error& e) {
    throw core::InputError("", "arguments", e.what());
  }
  return vm;
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out(1);
  for (char c : text)
    if (c == ',') out.emplace_back();
    else out.back().push_back(c);
  return out;
}

void check_output_option(const std::string& flag, const std::string& path) {
  try {
    reports::check_can_write(path);
  } catch (const std::exception& e) {
    throw core::InputError("", flag, e.what());
  }
}

double pct_option(const po::variables_map& vm, const char* name) {
  const double v = vm[name].as<double>();
  if (!std::isfinite(v)) throw core::InputError("", std::string("--") + name, fmt::format("must be a finite percentage, or < 0 for off (got {})", v));
  return v;
}

std::uint64_t seed_of(const po::variables_map& vm) {
  const std::string s = vm["seed"].as<std::string>();
  const bool digits = !s.empty() && s.size() <= 19 && s.find_first_not_of("0123456789") == std::string::npos;
  if (!digits) throw core::InputError("", "--seed", fmt::format("must be an integer in 0..{} (got '{}')", kMaxSeed, s));
  const std::uint64_t v = std::stoull(s);
  if (v > kMaxSeed) throw core::InputError("", "--seed", fmt::format("must be an integer in 0..{} (got '{}')", kMaxSeed, s));
  return v;
}

RungSet fixed_rungs(const po::variables_map& vm, const RunConfigRead* run_configs) {
  RungSet s = given(vm, "features") ? parse_rung_set(str(vm, "features"), "", "--features") : 0;
  if (run_configs != nullptr && run_configs->sp_size != 0) s |= bit(Rung::ulysses);
  for (const auto& r : rungs())
    if (given(vm, r.flag + 2)) s |= bit(r.rung);  // flag without its "--"
  return s;
}

Scenario scenario_from_options(const po::variables_map& vm, bool need_seq_len, RunConfigRead* run_configs) {
  const bool all = vm["all-features"].as<bool>();
  RunConfigRead rc;
  Scenario sc = base_scenario_from_options(vm, need_seq_len, all, &rc);
  if (run_configs != nullptr) *run_configs = rc;
  if (!all) return sc;
  const RungSet free = kAllRungs & ~fixed_rungs(vm, &rc);
  sc = with_rungs(sc, best_rungs_at(sc, free, 1), free);
  validate(sc, given(vm, "scenario") ? str(vm, "scenario") + " (with --all-features)" : "--all-features");
  return sc;
}

Scenario base_scenario_from_options(const po::variables_map& vm, bool need_seq_len, bool searching,
                                    RunConfigRead* run_configs) {
  Scenario sc;
  std::string origin;  // file named by validate() errors
  const bool from_file = given(vm, "scenario");
  if (from_file) {
    origin = str(vm, "scenario");
    sc = load_scenario(origin);
  } else {
    if (!given(vm, "model")) throw core::InputError("", "--model", "required without --scenario (e.g. --model llama-3.1-8b)");
    sc.name = "cli";
    if (!given(vm, "profile")) set_key(sc, "profile", "h100-sxm-80gb", "--profile (default)");
    sc.gpus = 1;
  }
  if (given(vm, "model")) set_key(sc, "model", str(vm, "model"), "--model");
  if (given(vm, "profile")) set_key(sc, "profile", str(vm, "profile"), "--profile");
  if (!sc.model.note.empty()) std::cerr << "ulysses: note: " << sc.model.note << "\n";
  RunConfigRead rc;  // scenario < Accelerate YAML < DeepSpeed JSON < flags
  if (given(vm, "accelerate-config") || given(vm, "deepspeed-config"))
    rc = apply_run_configs(sc, given(vm, "accelerate-config") ? str(vm, "accelerate-config") : "",
                           given(vm, "deepspeed-config") ? str(vm, "deepspeed-config") : "");
  const bool configs = !rc.empty();

  if (given(vm, "activation-checkpointing") && vm["no-activation-checkpointing"].as<bool>())
    throw core::InputError("", "--no-activation-checkpointing", "conflicts with --activation-checkpointing");
  if (given(vm, "causal") && vm["no-causal"].as<bool>())
    throw core::InputError("", "--no-causal", "conflicts with --causal");

  // The world size first: --all-features looks at it.
  if (given(vm, "gpus")) set_key(sc, "gpus", str(vm, "gpus"), "--gpus");
  if (given(vm, "gpus")) mark_overridden(rc, "gpus", "--gpus");

  const bool all = vm["all-features"].as<bool>();
  if (all) {  // the base of the ladder; the rungs are searched (sim/feature_search.hpp)
    set_key(sc, "plan.zero_stage", "3", "--all-features");
    set_key(sc, "plan.activation_checkpointing", "true", "--all-features");
    mark_overridden(rc, "plan.zero_stage", "--all-features");
    // the offload rungs a run config set are searched too (a flag fixes a rung, a config does not)
    for (const char* k : {"plan.offload_optimizer", "plan.offload_params"}) mark_overridden(rc, k, "--all-features (searched)");
  }
  // --features: those rungs on (ulysses as --sp-size auto), before the explicit flags
  const RungSet listed = given(vm, "features") ? parse_rung_set(str(vm, "features"), "", "--features") : 0;
  sc = with_rungs(sc, listed, listed & ~bit(Rung::ulysses));

  // the base of a search has sp auto too (a given dp_shard_size may need it); the search sets it per
  // subset. A run config's sp size stands: it fixes the ulysses rung like --sp-size does.
  const bool ulysses_searched = searching && !(fixed_rungs(vm, &rc) & bit(Rung::ulysses));
  bool sp_auto = ((listed & bit(Rung::ulysses)) || ulysses_searched) && !given(vm, "sp-size");
  bool overridden = false;
  for (const auto& f : kFlags) {
    if (std::string(f.key) == "gpus" || !given(vm, f.flag)) continue;
    overridden = true;
    const std::string v = str(vm, f.flag);
    if (std::string(f.flag) == "sp-size" && v == "auto") {
      sp_auto = true;
      continue;
    }
    set_key(sc, f.key, v, std::string("--") + f.flag);
    mark_overridden(rc, f.key, std::string("--") + f.flag);
  }
  if (vm["no-activation-checkpointing"].as<bool>())
    set_key(sc, "plan.activation_checkpointing", "false", "--no-activation-checkpointing");
  if (vm["no-causal"].as<bool>()) set_key(sc, "workload.causal", "false", "--no-causal");

  // GPUs not taken by sp and dp_replicate form dp_shard, unless dp_shard_size is given.
  const bool shard_given = given(vm, "dp-shard-size") && str(vm, "dp-shard-size") != "auto";
  const bool layout_changed =
      given(vm, "gpus") || given(vm, "sp-size") || given(vm, "dp-replicate-size") || sp_auto;
  const bool derive_shard = !shard_given && (!from_file || layout_changed);
  auto& p = sc.plan;
  if (derive_shard) p.dp_shard_auto = true;
  if (sp_auto) set_sp_auto(sc);  // the ulysses rung's sp (sim/rungs.hpp)
  if (derive_shard) {
    const std::int64_t taken = p.sp_size * p.dp_replicate_size;
    if (sc.gpus % taken != 0)
      throw core::InputError("", "--gpus",
                       "gpus (" + std::to_string(sc.gpus) + ") must be divisible by sp_size * dp_replicate_size (" +
                           std::to_string(p.sp_size) + " * " + std::to_string(p.dp_replicate_size) +
                           "); GPUs not taken by them form dp_shard_size");
    if (p.dp_shard_size != sc.gpus / taken) mark_overridden(rc, "plan.dp_shard_size", "gpus / (sp_size * dp_replicate_size)");
    p.dp_shard_size = sc.gpus / taken;
    p.dp_shard_auto = true;
  }
  if (sc.plan.seq_len <= 0) {
    if (need_seq_len) throw core::InputError("", "--seq-len", "required (the scenario sets no plan.seq_len)");
    sc.plan.seq_len = sc.plan.sp_size;  // placeholder: plan searches the length
  }
  if (run_configs != nullptr) *run_configs = rc;
  try {
    validate(sc, from_file ? origin + (overridden || all || given(vm, "gpus") ? " (with command-line overrides)" : "") : "");
  } catch (const core::InputError& e) {
    throw_if_from_run_config(e, rc);  // a key a run config set: its file and key
    if (from_file) throw;
    for (const auto& f : kFlags)      // name the flag of the key: "--sp-size (plan.sp_size)"
      if (e.key() == f.key) throw core::InputError("", std::string("--") + f.flag + " (" + f.key + ")", e.rule());
    throw;
  }
  if (configs) check_run_configs(rc, sc);
  return sc;
}

void add_runtime_options(po::options_description& d) {
  d.add_options()
      ("backend", po::value<std::string>()->default_value("cpu"), "cpu | cuda | deepspeed")
      ("warmup", po::value<int>()->default_value(2), "untimed iterations after the validating one")
      ("iters", po::value<int>()->default_value(5), "timed iterations (median, min, max over these)")
      ("seed", po::value<std::string>()->default_value("1234"), "seed of the random inputs (0..2^63-1)");
}

runtime::RunOptions run_options_of(const po::variables_map& vm) {
  runtime::RunOptions o;
  o.warmup = vm["warmup"].as<int>();
  o.iters = vm["iters"].as<int>();
  o.seed = seed_of(vm);
  if (o.warmup < 0 || o.warmup > kMaxIterations)
    throw core::InputError("", "--warmup", fmt::format("must be 0..{} (got {})", kMaxIterations, o.warmup));
  if (o.iters < 1 || o.iters > kMaxIterations)
    throw core::InputError("", "--iters", fmt::format("must be 1..{} (got {})", kMaxIterations, o.iters));
  o.verify = true;  // always on for run and compare
  return o;
}

std::string backend_of(const po::variables_map& vm) { return vm["backend"].as<std::string>(); }

std::string origin_of(const po::variables_map& vm) { return vm.count("scenario") ? vm["scenario"].as<std::string>() : ""; }

runtime::BlockShape block_shape_checked(const Scenario& sc, const po::variables_map& vm, const std::string& backend) {
  return eval::block_shape_checked(sc, origin_of(vm), backend);
}

void add_step_options(po::options_description& d) {
  d.add_options()
      ("layers", po::value<std::int64_t>(), "whole steps: decoder layers to build (default: the model's)")
      ("scope", po::value<std::string>(), "block (the Ulysses attention block; cpu and cuda's default) | step (the whole "
                                          "training step: --backend cuda; deepspeed runs steps only; run --backend cpu: the "
                                          "fp64 check at tiny shapes)")
;
}

bool is_step_run(const po::variables_map& vm, bool cpu_steps) {
  const std::string backend = backend_of(vm);
  const std::string scope = vm.count("scope") ? vm["scope"].as<std::string>() : (backend == "deepspeed" ? "step" : "block");
  if (scope != "block" && scope != "step") throw core::InputError("", "--scope", fmt::format("must be block or step (got '{}')", scope));
  if (backend == "deepspeed" && scope != "step") throw core::InputError("", "--scope", "the deepspeed backend runs whole steps only (--scope step)");
  if (backend == "cpu" && scope == "step" && !cpu_steps)
    throw core::InputError("", "--scope", "step: the cpu backend's whole step is a correctness check that `run` prints (compare, "
                                          "validate and capacity take whole steps on --backend cuda or deepspeed)");
  return scope == "step";
}

void refuse_step_options(const po::variables_map& vm, bool cpu_steps) {
  if (is_step_run(vm, cpu_steps)) return;
  for (const char* k : {"layers"})
    if (vm.count(k))
      throw core::InputError("", std::string("--") + k, "only whole steps take it (--scope step, or --backend deepspeed)");
}

Scenario with_layers(Scenario sc, const po::variables_map& vm) {
  if (!vm.count("layers")) return sc;
  const std::int64_t n = vm["layers"].as<std::int64_t>();
  if (n < 1 || n > sc.model.layers)
    throw core::InputError("", "--layers", fmt::format("must be 1..{} (the model's layers; got {})", sc.model.layers, n));
  sc.model.layers = n;
  return sc;
}

runtime::deepspeed::StepOptions step_options_of(const po::variables_map& vm) {
  runtime::deepspeed::StepOptions o;
  o.warmup = vm["warmup"].as<int>();
  o.iters = vm["iters"].as<int>();
  if (o.warmup < 0 || o.warmup > kMaxIterations)
    throw core::InputError("", "--warmup", fmt::format("must be 0..{} (got {})", kMaxIterations, o.warmup));
  if (o.iters < 1 || o.iters > kMaxIterations)
    throw core::InputError("", "--iters", fmt::format("must be 1..{} (got {})", kMaxIterations, o.iters));
  o.seed = seed_of(vm);
  return o;
}

void print_help(const char* prog, const std::string& synopsis, const std::string& summary,
                const po::options_description& d) {
  std::cout << "usage: " << prog << " " << synopsis << "\n" << summary << "\n\n" << d << "\n";
}

void print_machine_readable(const reports::Json& j, Format format) {
  if (format == Format::json) {
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::vector<std::string> header, row;
  for (auto& [k, v] : reports::flatten(j)) {
    header.push_back(k);
    row.push_back(v);
  }
  std::cout << reports::csv_row(header) << reports::csv_row(row);
}

void note_other_gpu(const Scenario& sc, const std::string& device) {
  if (const std::string note = eval::device_profile_note(sc, device); !note.empty()) std::cerr << note << "\n";
}

std::string profile_for_stored(const po::variables_map& vm, const reports::Json& rec, const std::string& path) {
  if (vm.count("profile")) return vm["profile"].as<std::string>();
  const eval::StoredProfile p = eval::stored_profile(rec, path);
  if (!p.note.empty()) std::cerr << p.note << "\n";
  return p.name;
}

}  // namespace ulysses::cli
