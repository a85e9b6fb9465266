#pragma once
// Flag handling shared by the commands: the subcommand registry, the scenario flags (one per plan
// key, with dashes), --scenario FILE with flags overriding it (through set_key, so the rules and
// messages are those of the YAML loader), --format table|json|csv, the backend and iteration flags
// of run/compare/validate/bench, and Boost errors -> InputError.
#include <cstdint>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "reports/json_out.hpp"
#include "runtime/backend.hpp"
#include "runtime/deepspeed/step_run.hpp"
#include "sim/run_config.hpp"
#include "sim/rungs.hpp"
#include "sim/scenario.hpp"

namespace ulysses::cli {

namespace po = boost::program_options;

// Subcommand registry. Each cli/cmd_<name>.cpp registers itself:
//   static const ulysses::cli::RegisterCommand reg{"plan", "largest sequence that fits", &run_plan};
// The function receives argv with argv[0] = "ulysses <name>" and returns the exit code
// (core/errors.hpp: 0 ok, 1 failure, 2 bad input). main() catches InputError -> exit 2 and
// any other exception -> exit 1, printing one line.
using CommandFn = int (*)(int argc, char** argv);

struct CommandInfo {
  const char* name;
  const char* summary;
  CommandFn fn;
};

std::vector<CommandInfo>& registry();  // defined by cli/main.cpp (and tests/fuzz/registry.cpp)

struct RegisterCommand {
  RegisterCommand(const char* name, const char* summary, CommandFn fn) { registry().push_back({name, summary, fn}); }
};

enum class Format { table, json, csv };

// --help layout: line width and the column where descriptions start.
inline constexpr unsigned kHelpColumns = 120, kHelpDescColumn = 60;

// --format table|json|csv
void add_format_option(po::options_description& d);
Format format_of(const po::variables_map& vm);  // InputError naming --format on a bad value
// Prints j to stdout as indented JSON (Format::json) or as one CSV header row + one row of its
// flattened keys (Format::csv): the machine-readable side of plan and predict.
void print_machine_readable(const reports::Json& j, Format format);

// --scenario, --model, --profile, --gpus, --gpus-per-node, --host-mem-GiB, --causal/--no-causal,
// every plan key (--sp-size, ..., --kv-strategy), --features LIST and --all-features.
void add_scenario_options(po::options_description& d);

// Parses argv; Boost errors (unknown option, missing or bad value) become one InputError
// naming the flag. Positional arguments go to the options named in `pos`.
po::variables_map parse_args(int argc, char** argv, const po::options_description& d,
                             const po::positional_options_description* pos = nullptr);

// The scenario the flags describe: --scenario FILE (or --model/--profile), then --all-features,
// then every explicit flag through set_key, then sp "auto" and the derived dp_shard_size,
// then validate(). Throws InputError (exit 2) on any bad input.
// need_seq_len (predict): a scenario without plan.seq_len and no --seq-len is an error naming
// --seq-len. Otherwise (plan, which searches the length) a missing seq_len is set to sp_size.
// --accelerate-config / --deepspeed-config are read after --scenario and before the flags; what
// they set is echoed into *run_configs when given (sim/run_config.hpp). --all-features picks the
// rungs not fixed by a flag at plan.seq_len (sim/feature_search.hpp best_rungs_at).
Scenario scenario_from_options(const po::variables_map& vm, bool need_seq_len = true,
                               RunConfigRead* run_configs = nullptr);

// The rungs the command line fixes (sim/rungs.hpp): each rung whose flag is given (--tiled-logits,
// --sp-size, --tiled-mlp, --offload-checkpoints, --offload-optimizer, --offload-params, on or off) or
// that --features lists. A search (--all-features, plan --target-seq-len) leaves them as given.
RungSet fixed_rungs(const po::variables_map& vm, const RunConfigRead* run_configs = nullptr);
// The scenario before the rungs a search chooses: as scenario_from_options, with the --all-features
// base (ZeRO-3, activation checkpointing) and no rung searched. `searching`: the caller searches the
// rungs not fixed, so dp_shard_size follows sp_size unless --dp-shard-size is given.
Scenario base_scenario_from_options(const po::variables_map& vm, bool need_seq_len, bool searching,
                                    RunConfigRead* run_configs = nullptr);

// --seed (a string option): decimal digits only, 0..kMaxSeed; InputError naming --seed otherwise
// A target in percent (--max-error-pct and kin): a finite number; < 0 turns the target off.
// InputError naming the option on NaN or infinity.
double pct_option(const po::variables_map& vm, const char* name);

// An output path given by a flag: fails before the run (InputError naming the flag) when it could not be
// written; creates nothing under that name (reports::check_can_write).
void check_output_option(const std::string& flag, const std::string& path);

// The items of a comma-separated flag value, empty items kept ("a,,b," -> a, "", b, ""), for the
// flag's own rule to refuse.
std::vector<std::string> split_commas(const std::string& text);

// --warmup / --iters of every run: at most this many
inline constexpr int kMaxIterations = 1000;
inline constexpr std::uint64_t kMaxSeed = (std::uint64_t{1} << 63) - 1;
std::uint64_t seed_of(const po::variables_map& vm);

// --backend cpu|cuda|deepspeed, --warmup N, --iters N, --seed N
void add_runtime_options(po::options_description& d);
runtime::RunOptions run_options_of(const po::variables_map& vm);  // InputError on bad counts
std::string backend_of(const po::variables_map& vm);
std::string origin_of(const po::variables_map& vm);  // the --scenario file, or "" (command line)
// eval::block_shape_checked with errors naming origin_of(vm).
runtime::BlockShape block_shape_checked(const Scenario& sc, const po::variables_map& vm, const std::string& backend);

// Whole steps' flags: --layers N, --scope block|step.
void add_step_options(po::options_description& d);
// A whole step (--backend deepspeed, or --scope step); InputError for a bad --scope.
bool is_step_run(const po::variables_map& vm, bool cpu_steps = false);  // cpu_steps: the command takes the cpu step (run)
// InputError when --layers is given to a block run.
void refuse_step_options(const po::variables_map& vm, bool cpu_steps = false);
// --layers applied to the scenario (InputError when <= 0 or above the model's layers).
Scenario with_layers(Scenario sc, const po::variables_map& vm);
runtime::deepspeed::StepOptions step_options_of(const po::variables_map& vm);  // warmup/iters/seed

// Prints "usage: <prog> <positional>\n<summary>\n\n<options>" to stdout.
void print_help(const char* prog, const std::string& synopsis, const std::string& summary,
                const po::options_description& d);

// One line on stderr when the GPU that ran is not the profile's (eval::device_profile_note).
void note_other_gpu(const Scenario& sc, const std::string& device);

// The profile `--stored` re-predicts with: --profile when given, else the record's (eval::stored_profile; its
// fallback note, if any, goes to stderr).
std::string profile_for_stored(const po::variables_map& vm, const reports::Json& rec, const std::string& path);

}  // namespace ulysses::cli
