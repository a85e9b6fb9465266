// `ulysses calibrate`: the options of each backend (--backend cpu | cuda | deepspeed, --from-raw),
// the measurements and fits of calib/, and where the result goes (calib/profile_out.hpp): the
// `calibrated:` section printed, or written into a copy of the base profile.
#include <cstdint>
#include <iostream>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "calib/cpu/calibrate.hpp"
#include "calib/deepspeed.hpp"
#include "sim/tokens.hpp"
#include "calib/profile_out.hpp"
#include "calib/raw_file.hpp"
#include "cli/options.hpp"
#include "reports/file_out.hpp"
#include "sim/config.hpp"
#include "core/errors.hpp"

#ifdef ULYSSES_WITH_CUDA
#include "calib/cuda/calibrate.hpp"
#endif

namespace ulysses::cli {
namespace {

std::vector<std::int64_t> parse_int_list(const std::string& text, const char* flag, std::int64_t lo) {
  std::vector<std::int64_t> out;
  for (const std::string& item : split_commas(text)) {
    try {
      std::size_t used = 0;
      const long long v = std::stoll(item, &used);
      if (used != item.size() || v < lo) throw std::invalid_argument("range");
      out.push_back(v);
    } catch (const std::exception&) {
      throw core::InputError("", flag, fmt::format("'{}' is not a comma-separated list of integers >= {}", text, lo));
    }
  }
  if (out.empty()) throw core::InputError("", flag, "must list at least one value");
  return out;
}

// A count written as a token count (256M, 64Ki: sim/tokens.hpp), or 0 for "none".
std::int64_t count_or_zero(const std::string& text, const char* flag) { return text == "0" ? 0 : parse_tokens(text, "", flag); }

// argv joined by spaces, from `first` (0: with the program, "ulysses calibrate").
std::string command_line(int argc, char** argv, int first) {
  std::string s;
  for (int i = first; i < argc; ++i) {
    if (i > first) s += ' ';
    s += argv[i];
  }
  return s;
}

// The result: the section printed (no --profile-out) or the base profile written with it.
void print_profile_out(const po::variables_map& vm, const std::string& profile_name, const Calibration& c) {
  const std::optional<std::string> out =
      vm.count("profile-out") ? std::optional<std::string>(vm["profile-out"].as<std::string>()) : std::nullopt;
  std::cout << calib::write_profile_out(vm["profile"].as<std::string>(), out, profile_name, c);
}

// --backend X (each backend has its own flags) and --from-raw are told apart before parsing.
bool asks_for(int argc, char** argv, const std::string& backend) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--backend=" + backend || (a == "--backend" && i + 1 < argc && std::string(argv[i + 1]) == backend)) return true;
  }
  return false;
}

bool asks_for_raw(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]).rfind("--from-raw", 0) == 0) return true;
  return false;
}

// `calibrate --from-raw FILE --profile P [--profile-out OUT]`: re-derives the exchange curves (from
// "a2a" samples) and/or the idle-link penalty curve (from "a2a_idle" samples) of a profile's
// calibrated section from the raw JSON that `calibrate --json` stored (no GPU).
int run_calibrate_from_raw(int argc, char** argv) {
  po::options_description d("calibrate --from-raw options");
  d.add_options()("help,h", "this help")("from-raw", po::value<std::string>(), "raw JSON written by `calibrate --backend cuda --json`")
      ("backend", po::value<std::string>()->default_value("cuda"), "cuda (the backend the raw file came from)")
      ("profile", po::value<std::string>()->default_value("h200-sxm-141gb"), "profile (name or path) whose calibrated section is updated")
      ("profile-out", po::value<std::string>(), "write the profile with the updated section here (else print the section)");
  const auto vm = parse_args(argc, argv, d);
  if (vm.count("help") || !vm.count("from-raw")) {
    print_help(argv[0], "--from-raw FILE [--profile h200-sxm-141gb] [--profile-out FILE]",
               "Re-derives a profile's exchange curves from stored raw calibration measurements (no GPU needed):\n"
               "after a change of how curves are derived, the same measurements give the new curves.",
               d);
    return vm.count("help") ? core::kExitOk : core::kExitInput;
  }
  const calib::CalibrationRaw raw = calib::read_calibration_raw(vm["from-raw"].as<std::string>());
  const HardwareProfile hw = load_profile(vm["profile"].as<std::string>());
  const Calibration c = calib::rederive_from_raw(raw, hw, vm["profile"].as<std::string>(),
                                                 "ulysses calibrate " + command_line(argc, argv, 1), std::cout);
  print_profile_out(vm, hw.name, c);
  return core::kExitOk;
}

// `calibrate --backend cuda`: calib/cuda/calibrate.hpp on the GPUs of this host.
int run_calibrate_cuda(int argc, char** argv) {
  po::options_description d("calibrate --backend cuda options");
  d.add_options()("help,h", "this help")("backend", po::value<std::string>()->default_value("cuda"), "cuda")
      ("profile", po::value<std::string>()->default_value("h200-sxm-141gb"), "base profile (name or path)")
      ("profile-out", po::value<std::string>(), "write the base profile with the `calibrated:` section here (else print it)")
      ("json", po::value<std::string>(), "also write every raw measurement as JSON here")
      ("quick", po::bool_switch(), "two S points, h 4 and 16, three exchange sizes (a smoke test)")
      ("only", po::value<std::string>(), "a2a-idle: measure only the exchange-after-idle-links curve; ulysses-kernels: only "
                                          "our runtime's elementwise kernels, host optimizer and cuBLASLt GEMMs (the step model's rates for "
                                          "plan.runtime ulysses); attention: only our flash kernels' attention curves; "
                                          "each updated in the profile's existing calibrated section");
  const auto vm = parse_args(argc, argv, d);
  if (vm.count("help")) {
    print_help(argv[0], "--backend cuda [--profile h200-sxm-141gb] [--profile-out FILE] [--json FILE]",
               "Measures the CUDA backend's building blocks and writes the `calibrated:` section of a profile.", d);
    return core::kExitOk;
  }
  if (vm.count("only") && vm["quick"].as<bool>())
    throw core::InputError("", "--quick", "cannot be combined with --only (it shortens the whole calibration only)");
#ifndef ULYSSES_WITH_CUDA
  throw core::InputError("", "--backend", "'cuda': this ulysses was built without the CUDA backend (CUDA, NCCL, CUPTI, NVTX)");
#else
  const HardwareProfile hw = load_profile(vm["profile"].as<std::string>());
  const std::string cmd = command_line(argc, argv, 0);  // "ulysses <command> ..."
  calib::cuda::Result r;
  if (vm.count("only")) {
    const std::string only = vm["only"].as<std::string>();
    if (only != "a2a-idle" && only != "ulysses-kernels" && only != "attention")
      throw core::InputError("", "--only", "must be a2a-idle, ulysses-kernels or attention");
    if (!hw.has_calibration) throw core::InputError(vm["profile"].as<std::string>(), "calibrated", "--only needs a profile with a calibrated section");
    r = only == "a2a-idle"          ? calib::cuda::calibrate_idle_only(hw, cmd)
        : only == "ulysses-kernels" ? calib::cuda::calibrate_kernels_only(hw, cmd)
                                    : calib::cuda::calibrate_attention_only(hw, cmd);
  } else {
    r = calib::cuda::calibrate(hw, vm["quick"].as<bool>(), cmd);
  }
  std::cout << r.report << "\n";
  if (vm.count("json")) reports::write_file_atomic(vm["json"].as<std::string>(), r.raw.dump(1) + "\n");
  print_profile_out(vm, hw.name, r.c);
  return core::kExitOk;
#endif
}

// `calibrate --backend deepspeed`: calib/deepspeed.hpp (the worker on torchrun ranks).
int run_calibrate_deepspeed(int argc, char** argv) {
  po::options_description d("calibrate --backend deepspeed options");
  d.add_options()("help,h", "this help")
      ("backend", po::value<std::string>(), "deepspeed")
      ("profile", po::value<std::string>()->default_value("h200-sxm-141gb"), "base profile (name or path)")
      ("profile-out", po::value<std::string>(), "write the profile with the updated `calibrated:` section here (else print it)")
      ("model", po::value<std::string>()->default_value("llama-3.1-8b"), "model preset of the set-up step")
      ("layers", po::value<std::int64_t>()->default_value(1), "its decoder layers")
      ("seq-len", po::value<std::int64_t>()->default_value(4096), "its sequence length")
      ("gpus", po::value<std::int64_t>()->default_value(1), "ranks (torchrun): 1 measures the context, P > 1 the NCCL buffers")
      ("tiled-logits", "the set-up step with tiled logits/loss (the phase clock's host cost per tile)")
      ("tiled-mlp", "the set-up step with TiledMLP (the phase clock's host cost per shard)")
      ("offload-checkpoints", "the set-up step with checkpoints offloaded to pinned host memory")
      ("op-seq-lens", po::value<std::string>()->default_value("4Ki,16Ki,32Ki,64Ki"),
       "one GPU: the op bench's lengths (attention of the model's heads, its GEMMs at S tokens); none: no op bench")
      ("op-adam-params", po::value<std::string>()->default_value("256M"), "one GPU: torch AdamW step over this many parameters (0: not timed)")
      ("op-cpu-adam-params", po::value<std::string>()->default_value("256M"), "one GPU: DeepSpeedCPUAdam step over this many parameters (0: not timed)");
  const auto vm = parse_args(argc, argv, d);
  if (vm.count("help")) {
    print_help(argv[0], "--backend deepspeed --profile NAME [--gpus P] [--profile-out FILE]",
               "Measures what the PyTorch process of HF + Accelerate + DeepSpeed holds on the device outside its\n"
               "caching allocator (cudaMemGetInfo used - memory_reserved, after set-up and two ZeRO-3 steps of a\n"
               "small model): the model's cuda_context (and nccl_buffers) for plan.runtime pytorch. With one GPU\n"
               "also the op bench: the HF attention function, the layer's GEMMs, torch AdamW and CPU Adam, each\n"
               "timed alone, as attn_*_eff curves, gemm_eff, torch_adamw_ns_per_param and cpu_adam_ns_per_param.",
               d);
    return core::kExitOk;
  }
  calib::deepspeed::Setup s;
  s.model = vm["model"].as<std::string>();
  s.profile = vm["profile"].as<std::string>();
  s.layers = vm["layers"].as<std::int64_t>();
  s.seq_len = vm["seq-len"].as<std::int64_t>();
  s.gpus = vm["gpus"].as<std::int64_t>();
  s.tiled_logits = vm.count("tiled-logits") > 0, s.tiled_mlp = vm.count("tiled-mlp") > 0;
  s.offload_checkpoints = vm.count("offload-checkpoints") > 0;
  s.op_seq_lens.clear();
  if (const std::string lens = vm["op-seq-lens"].as<std::string>(); lens != "none")
    for (const std::string& item : split_commas(lens)) s.op_seq_lens.push_back(parse_tokens(item, "", "--op-seq-lens"));
  s.op_adam_params = count_or_zero(vm["op-adam-params"].as<std::string>(), "--op-adam-params");
  s.op_cpu_adam_params = count_or_zero(vm["op-cpu-adam-params"].as<std::string>(), "--op-cpu-adam-params");
  const calib::deepspeed::Result r = calib::deepspeed::calibrate(s);
  std::cout << r.what << "\n";
  for (const std::string& line : r.ops) std::cout << "op bench: " << line << "\n";
  for (const std::string& line : r.phase_clock) std::cout << line << "\n";
  print_profile_out(vm, r.profile_name, r.c);
  return core::kExitOk;
}

int run_calibrate(int argc, char** argv) {
  if (asks_for_raw(argc, argv)) return run_calibrate_from_raw(argc, argv);
  if (asks_for(argc, argv, "cuda")) return run_calibrate_cuda(argc, argv);
  if (asks_for(argc, argv, "deepspeed")) return run_calibrate_deepspeed(argc, argv);
  po::options_description d("calibrate options");
  d.add_options()("help,h", "this help")
      ("backend", po::value<std::string>()->default_value("cpu"), "cpu | cuda | deepspeed (see --backend X --help)")
      ("profile", po::value<std::string>()->default_value("cpu-local"), "base profile (name or path) the section is added to")
      ("profile-out", po::value<std::string>(), "write the base profile with the `calibrated:` section here (else print the section)")
      ("sp-sizes", po::value<std::string>()->default_value("2,4"), "sp sizes (thread-ranks) of the exchange curves")
      ("threads", po::value<int>()->default_value(2), "threads running attention and pack at once (ranks on this host)")
      ("iters", po::value<int>()->default_value(9), "iterations per exchange / pack point (median)")
      ("heads-per-rank", po::value<std::int64_t>()->default_value(4), "attention shape: query heads per thread")
      ("kv-heads-per-rank", po::value<std::int64_t>()->default_value(1), "attention shape: kv heads per thread")
      ("head-dim", po::value<std::int64_t>()->default_value(64), "attention shape: D")
      ("non-causal", po::bool_switch(), "attention shape: without the causal mask")
      ("attn-implementation", po::value<std::string>()->default_value("ulysses_reference"),
       "the implementation name the attention curves are filed under (scenarios select it by plan.attn_implementation)")
      ("quick", po::bool_switch(), "fewer, smaller points (seconds; for tests)");
  const auto vm = parse_args(argc, argv, d);
  if (vm.count("help")) {
    print_help(argv[0], "--backend cpu [--profile-out FILE] [--profile cpu-local]",
               "Measures the CPU backend (all-to-all busbw vs bytes per rank per sp size, attention efficiency\n"
               "vs S, pack bandwidth) and writes them as the `calibrated:` section of a profile.",
               d);
    return core::kExitOk;
  }
  if (vm["backend"].as<std::string>() != "cpu")
    throw core::InputError("", "--backend", fmt::format("'{}' is not a backend (cpu | cuda | deepspeed)", vm["backend"].as<std::string>()));
  calib::cpu::Setup s;
  s.quick = vm["quick"].as<bool>();
  s.sp_sizes = parse_int_list(vm["sp-sizes"].as<std::string>(), "--sp-sizes", 2);
  s.threads = vm["threads"].as<int>();
  s.iters = vm["iters"].as<int>();
  s.heads = vm["heads-per-rank"].as<std::int64_t>();
  s.kv_heads = vm["kv-heads-per-rank"].as<std::int64_t>();
  s.head_dim = vm["head-dim"].as<std::int64_t>();
  s.causal = !vm["non-causal"].as<bool>();
  s.impl = vm["attn-implementation"].as<std::string>();
  if (s.threads < 1 || s.threads > 64) throw core::InputError("", "--threads", "must be 1..64");
  if (s.iters < 1) throw core::InputError("", "--iters", "must be >= 1");
  for (std::int64_t P : s.sp_sizes)
    if (P > 64) throw core::InputError("", "--sp-sizes", "thread-ranks are limited to 64");
  if (s.heads < 1 || s.kv_heads < 1 || s.heads % s.kv_heads != 0 || s.head_dim < 1)
    throw core::InputError("", "--heads-per-rank", "heads and kv heads per rank must be positive, heads a multiple of kv heads");

  const HardwareProfile hw = load_profile(vm["profile"].as<std::string>());  // InputError on a bad profile
  const calib::cpu::Result r = calib::cpu::calibrate(s, hw, command_line(argc, argv, 0));
  std::cout << r.report << "\n";
  print_profile_out(vm, hw.name, r.c);
  return core::kExitOk;
}

const RegisterCommand reg{"calibrate", "microbenchmarks -> the calibrated: section of a hardware profile", &run_calibrate};

}  // namespace
}  // namespace ulysses::cli
