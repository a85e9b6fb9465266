// ulysses bench exchange|attention|block|layer: CUDA microbenchmarks of the Ulysses attention block; bench step:
// our runtime's whole step next to the deepspeed backend's.
// Each validates first (#wrong column), warms up, then times: median = max over ranks of the
// per-rank median, max = max over ranks and iterations.
// Bandwidth as nccl-tests defines it for all-to-all: algbw = bytes_per_rank / time,
// busbw = algbw * (P-1)/P, GB = 1e9 bytes.
// --peer FILE reads bench/peers/ulysses_peer.py's JSON from the same device call and prints the
// ratios against it.
// The benches themselves are bench/ (bench.hpp, attention_sweep.hpp); this file parses, calls, prints.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/attention_sweep.hpp"
#include "bench/attn_points.hpp"
#include "bench/step_bench.hpp"
#include "cli/options.hpp"
#include "eval/block_run.hpp"
#include "reports/file_out.hpp"
#include "reports/table.hpp"
#include "core/errors.hpp"
#include "core/layout.hpp"

#ifdef ULYSSES_WITH_CUDA
#include "bench/bench.hpp"
#include "runtime/backend_registry.hpp"
#include "runtime/cuda/cuda_backend.hpp"
#endif

namespace ulysses::cli {
namespace {

// ---- the attention sweep's flags ----

// The sweep's repetition flags, checked (the rest of the request: attention_sweep_cmd)
bench::SweepRequest settings_of(const po::variables_map& vm) {
  bench::SweepRequest s;
  s.min_reps = vm["min-reps"].as<int>();
  s.min_time_s = vm["min-time-s"].as<double>();
  s.check_seq = vm["check-seq"].as<std::int64_t>();
  if (s.min_reps < 1 || s.min_reps > 100) throw core::InputError("", "--min-reps", fmt::format("must be in 1..100 (got {})", s.min_reps));
  if (!(s.min_time_s >= 0 && s.min_time_s <= 10))
    throw core::InputError("", "--min-time-s", fmt::format("must be in 0..10 seconds (got {})", s.min_time_s));
  if (s.check_seq < 1 || s.check_seq > 2048)
    throw core::InputError("", "--check-seq", fmt::format("must be in 1..2048 (the fp64 CPU oracle is O(S^2)); got {}", s.check_seq));
  return s;
}

void add_attention_sweep_options(po::options_description& d) {
  d.add_options()
      ("sweep", po::bool_switch(), "attention: the issue-5 grid (S 4K,16K,32K,128K x H 16,32 x H_kv H,8 x D 64,128 x causal/not; 64 points)")
      ("quick", po::bool_switch(), "attention: a 16-point subset (S 4K,32K, H 16)")
      ("points", po::value<std::string>(), "attention: S:H:HKV:D:CAUSAL[,...], e.g. 32768:16:16:128:1 (H, HKV: local heads)")
      ("peer-python", po::value<std::string>()->default_value("python3"), "attention sweep: python that runs bench/peers/attn_peer.py")
      ("no-peer", po::bool_switch(), "attention sweep: do not run the PyTorch peers")
      ("csv", po::value<std::string>(), "attention sweep: also write every row as CSV to this file")
      ("min-reps", po::value<int>()->default_value(3), "attention sweep: timed repetitions per pass, at least")
      ("min-time-s", po::value<double>()->default_value(0.3), "attention sweep: timed seconds per pass, at least")
      ("check-seq", po::value<std::int64_t>()->default_value(256), "attention sweep: S of the fp64 oracle check");
}

std::vector<bench::AttnPoint> attention_sweep_points(const po::variables_map& vm, const std::string& what,
                                                     const po::options_description& scenario_options) {
  const int chosen = int(vm["sweep"].as<bool>()) + int(vm["quick"].as<bool>()) + int(vm.count("points") > 0);
  if (chosen == 0) return {};
  if (what != "attention")
    throw core::InputError("", vm.count("points") ? "--points" : vm["sweep"].as<bool>() ? "--sweep" : "--quick",
                     "only with `bench attention` (got bench " + what + ")");
  if (chosen > 1) throw core::InputError("", "--points", "give one of --sweep, --quick, --points");
  if (vm.count("peer"))
    throw core::InputError("", "--peer", "not with --sweep/--quick/--points: the sweep runs attn_peer.py itself (--peer-python, --no-peer)");
  for (const char* flag : {"warmup", "iters"})
    if (!vm[flag].defaulted())
      throw core::InputError("", std::string("--") + flag, "not with --sweep/--quick/--points (use --min-reps, --min-time-s)");
  if (vm["backend"].as<std::string>() != "cpu" && vm["backend"].as<std::string>() != "cuda")
    throw core::InputError("", "--backend", "the attention sweep runs on cuda");
  for (const auto& o : scenario_options.options()) {
    const std::string& name = o->long_name();
    if (vm.count(name) && !vm[name].defaulted())
      throw core::InputError("", "--" + name, "not with --sweep/--quick/--points: each point gives its own S, H, H_kv, D, causal");
  }
  settings_of(vm);  // the repetition flags are user input too: check them before any device work
  if (vm["sweep"].as<bool>()) return bench::attn_issue_grid();
  if (vm["quick"].as<bool>()) return bench::attn_quick_grid();
  return bench::parse_attn_points(vm["points"].as<std::string>());
}

// The sweep's request from the flags (checked here: a bad path fails before the device work)
int attention_sweep_cmd(const po::variables_map& vm, std::vector<bench::AttnPoint> points) {
  bench::SweepRequest req = settings_of(vm);
  req.points = std::move(points);
  req.peer = !vm["no-peer"].as<bool>();
  req.peer_python = vm["peer-python"].as<std::string>();
#ifdef ULYSSES_WITH_CUDA
  if (vm.count("json")) check_output_option("--json", req.json_path = vm["json"].as<std::string>());
  if (vm.count("csv")) check_output_option("--csv", req.csv_path = vm["csv"].as<std::string>());
  req.seed = seed_of(vm);
  req.timeout_s = vm["timeout"].as<double>();
#endif
  return bench::run_attention_sweep(req);
}

#ifdef ULYSSES_WITH_CUDA

std::string us(double s) { return fmt::format("{:.1f}", s * 1e6); }

nlohmann::json read_peer(const po::variables_map& vm) {
  if (!vm.count("peer")) return nullptr;
  const std::string path = vm["peer"].as<std::string>();
  std::ifstream f(path);
  if (!f) throw core::InputError(path, "--peer", "cannot open the peer's JSON file");
  std::stringstream ss;
  ss << f.rdbuf();
  // the peer prints one JSON object per line of interest; take the last line that parses
  nlohmann::json j = nullptr;
  std::string line;
  std::istringstream lines(ss.str());
  while (std::getline(lines, line)) {
    auto k = nlohmann::json::parse(line, nullptr, false);
    if (!k.is_discarded() && k.is_object()) j = k;
  }
  if (j.is_null()) throw core::InputError(path, "--peer", "holds no JSON object line");
  return j;
}

double peer_ms(const nlohmann::json& peer, const char* a, const char* b = nullptr) {
  if (peer.is_null() || !peer.contains(a)) return 0;
  const auto& x = b ? peer[a] : peer;
  if (b && (!x.is_object() || !x.contains(b))) return 0;
  const auto& v = b ? x[b] : x[a];
  return v.is_number() ? v.get<double>() : 0;
}

std::vector<int> parse_slices(const std::string& s) {
  std::vector<int> out;
  for (const std::string& tok : split_commas(s)) {
    char* end = nullptr;
    const long v = std::strtol(tok.c_str(), &end, 10);
    if (tok.empty() || *end || v < 1 || v > 64) throw core::InputError("", "--slices", "a comma list of integers in 1..64, e.g. 1,2,4");
    out.push_back(static_cast<int>(v));
  }
  if (out.empty()) throw core::InputError("", "--slices", "needs at least one value");
  return out;
}

int bench_exchange_cmd(const runtime::BlockShape& shape, const runtime::RunOptions& opt, const po::variables_map& vm) {
  const auto res = bench::bench_exchange(shape, opt, parse_slices(vm["slices"].as<std::string>()));
  if (res.launcher_follower) return core::kExitOk;
  const nlohmann::json peer = read_peer(vm);
  std::cout << fmt::format("bench exchange: a2a.qkv.fwd on {}\nB={} S={} H={} H_kv={} D={} P={} kv_strategy={}\n"
                           "busbw = algbw * (P-1)/P, algbw = bytes per rank / time (nccl-tests), GB = 1e9 B\n\n",
                           res.device, shape.B, shape.S, shape.H, shape.H_kv, shape.D, shape.P,
                           shape.kv_strategy == KvStrategy::replicate ? "replicate" : "send_once");
  reports::Table t({{"variant", "", reports::Align::left}, {"size", "B/rank"}, {"median", "us"}, {"max", "us"},
                    {"algbw", "GB/s"}, {"busbw", "GB/s"}, {"#wrong", ""}});
  bool ok = true;
  double best = 0, bare = 0;
  for (const auto& r : res.rows) {
    t.add_row({r.name, fmt::format("{}", r.bytes_per_rank), us(r.median_s), us(r.max_s),
               fmt::format("{:.1f}", bench::algbw_GBps(r)), fmt::format("{:.1f}", bench::busbw_GBps(r, shape.P)),
               fmt::format("{}", r.wrong)});
    ok = ok && r.wrong == 0;
    if (r.name.rfind("ulysses", 0) == 0 && (best == 0 || r.median_s < best)) best = r.median_s;
    if (r.name.find("ncclAlltoAll") != std::string::npos) bare = r.median_s;
  }
  std::cout << t.render() << "\n";
  if (best > 0 && bare > 0)
    std::cout << fmt::format("ulysses q,k,v exchange (best) / bare ncclAlltoAll of the same bytes: {:.3f}x (target <= 1.10)\n",
                             best / bare);
  if (const double p = peer_ms(peer, "exchange_qkv_ms"); p > 0 && best > 0)
    std::cout << fmt::format("PyTorch peer q,k,v exchange {:.1f} us / ulysses {:.1f} us: {:.2f}x faster (target >= 1.5)\n",
                             p * 1e3, best * 1e6, p * 1e-3 / best);
  std::cout << (ok ? "validation: all exchanges bit-exact\n" : "validation: FAILED (#wrong > 0)\n");
  return ok ? core::kExitOk : core::kExitFailure;
}

// The layer's kernels at one rank's shapes of the scenario (T = B * S / P tokens), with the rates
// against the profile's limits (hbm_GBps, bf16_dense_flops).
int bench_layer_cmd(const Scenario& sc, const runtime::BlockShape& shape, const runtime::RunOptions& opt) {
  const bench::LayerShape ls{shape.B * shape.S / shape.P, sc.model.hidden, sc.model.ffn_hidden, shape.H / shape.P,
                             core::heads_per_rank(shape.H_kv, shape.P), shape.D};
  const auto res = bench::bench_layer(ls, opt);
  std::cout << fmt::format("bench layer: a decoder layer's kernels outside attention on {}\n"
                           "T={} h={} F={} H={} H_kv={} D={} (one rank of {}, {} GPU(s)); limits of {}: HBM {:.0f} GB/s, bf16 {:.0f} TFLOP/s\n"
                           "bytes = each input read once, each output written once; GEMM FLOPs = 2 M N K\n\n",
                           res.device, ls.T, ls.h, ls.F, ls.H, ls.H_kv, ls.D, sc.model.name, sc.gpus, sc.hw.name, sc.hw.hbm_GBps,
                           sc.hw.bf16_dense_flops * 1e-12);
  reports::Table t({{"kernel", "", reports::Align::left}, {"median", "us"}, {"max", "us"}, {"rate", ""},
                    {"of limit", "%"}, {"#wrong", ""}});
  bool ok = true;
  for (const auto& r : res.rows) {
    const bool gemm = r.flops > 0;
    const double rate = r.median_s > 0 ? (gemm ? r.flops / r.median_s * 1e-12 : double(r.bytes_per_rank) / r.median_s * 1e-9) : 0;
    const double limit = gemm ? sc.hw.bf16_dense_flops * 1e-12 : sc.hw.hbm_GBps;
    t.add_row({r.name, us(r.median_s), us(r.max_s), fmt::format("{:.1f} {}", rate, gemm ? "TFLOP/s" : "GB/s"),
               limit > 0 ? fmt::format("{:.1f}", 100 * rate / limit) : "-", fmt::format("{}", r.wrong)});
    ok = ok && r.wrong == 0;
  }
  std::cout << t.render();
  for (const auto& r : res.rows)
    if (!r.note.empty()) std::cout << r.name << ": " << r.note << "\n";
  std::cout << (ok ? "validation: every kernel within its tolerance of the fp64 oracle\n" : "validation: FAILED (#wrong > 0)\n");
  return ok ? core::kExitOk : core::kExitFailure;
}

int bench_attention_cmd(const runtime::BlockShape& shape, const runtime::RunOptions& opt) {
  const auto res = bench::bench_attention(shape, opt);
  if (res.launcher_follower) return core::kExitOk;
  std::cout << fmt::format("bench attention: local attention of one rank on {}\nB={} S={} H_local={} H_kv_local={} D={} {}\n"
                           "FLOPs fwd = 4*B*S^2*H*D (half when causal), bwd = 2.5x fwd; TFLOP/s on the median\n\n",
                           res.device, shape.B, shape.S, shape.H / shape.P, shape.H_kv >= shape.P ? shape.H_kv / shape.P : 1,
                           shape.D, shape.causal ? "causal" : "non-causal");
  reports::Table t({{"pass", "", reports::Align::left}, {"median", "us"}, {"max", "us"}, {"rate", "TFLOP/s"},
                    {"#wrong", ""}, {"validation", "", reports::Align::left}});
  bool ok = true, any = false;
  for (const auto& r : res.rows) {
    const bool ran = r.wrong >= 0;
    t.add_row({r.name, ran ? us(r.median_s) : "-", ran ? us(r.max_s) : "-",
               ran && r.median_s > 0 ? fmt::format("{:.1f}", r.flops / r.median_s * 1e-12) : "-",
               ran ? fmt::format("{}", r.wrong) : "-", r.note});
    if (ran) ok = ok && r.wrong == 0, any = true;
  }
  std::cout << t.render();
  return ok && any ? core::kExitOk : core::kExitFailure;
}

int bench_block_cmd(const runtime::BlockShape& shape, const runtime::RunOptions& opt, const po::variables_map& vm) {
  runtime::cuda::CudaBackend be;
  runtime::cuda::CudaRunConfig cfg;
  cfg.slices = vm.count("slices") && !vm["slices"].defaulted() ? parse_slices(vm["slices"].as<std::string>())[0]
                                                               : runtime::cuda::default_slices();
  cfg.followers_exit = false;
  std::vector<runtime::cuda::RankReport> reps;
  const runtime::Measurement m = be.run_block_ex(shape, opt, cfg, &reps);
  if (m.device.find("one process per GPU") != std::string::npos && !reps.empty()) {
    const char* rank = std::getenv("RANK");
    if (rank && std::string(rank) != "0") return m.correct ? core::kExitOk : core::kExitFailure;
  }
  std::cout << "bench block (exchange slices " << cfg.slices << ")\n" << eval::measurement_table(m);
  double fwd = 0, bwd = 0;
  for (std::size_t i = 0; i < m.phases.size(); ++i) (i < 3 ? fwd : bwd) += m.phases[i].median_s;
  std::cout << fmt::format("\nblock fwd {:.1f} us, bwd {:.1f} us, fwd+bwd {:.1f} us (sum of phase medians)\n", fwd * 1e6,
                           bwd * 1e6, (fwd + bwd) * 1e6);
  std::cout << "traced iteration, GPU busy per phase (CUPTI, rank 0):";
  for (int p = 0; p < 6 && !reps.empty(); ++p) std::cout << fmt::format(" {} {:.1f} us;", m.phases[p].name, reps[0].traced_busy_s[p] * 1e6);
  std::cout << fmt::format("\ndevice memory used (cudaMemGetInfo, max seen) rank 0: {} bytes\n",
                           reps.empty() ? 0 : reps[0].device_used_peak_bytes);
  const nlohmann::json peer = read_peer(vm);
  for (const char* backend : {"flash", "cudnn"}) {
    const double f = peer_ms(peer, backend, "fwd_ms"), fb = peer_ms(peer, backend, "fwd_bwd_ms");
    if (fb > 0)
      std::cout << fmt::format("PyTorch peer ({}): fwd {:.1f} us, fwd+bwd {:.1f} us -> ulysses fwd+bwd / peer = {:.3f}x{}\n",
                               backend, f * 1e3, fb * 1e3, (fwd + bwd) / (fb * 1e-3),
                               std::string(backend) == "flash" ? " (target <= 1.5)" : "");
  }
  if (vm.count("json")) {
    reports::write_file_atomic(vm["json"].as<std::string>(), eval::measurement_json(m).dump(2) + "\n");
  }
  return m.correct ? core::kExitOk : core::kExitFailure;
}

#endif

// bench step: ours next to the peer on one scenario (bench/step_bench.hpp).
int bench_step_cmd(const po::variables_map& vm) {
  const std::vector<std::string> backends = split_commas(vm["backends"].as<std::string>());
  if (backends.size() != 2 || backends[0].empty() || backends[1].empty())
    throw core::InputError("", "--backends", "must name two backends, ours then the peer (e.g. cuda,deepspeed)");
  for (const auto& b : backends)
    if (b != "cpu" && b != "cuda" && b != "deepspeed")
      throw core::InputError("", "--backends", fmt::format("'{}' is not one of cpu, cuda, deepspeed", b));
  if (vm.count("json")) check_output_option("--json", vm["json"].as<std::string>());  // a bad path fails before the runs
  const Scenario sc = with_layers(scenario_from_options(vm, true), vm);
  const bench::StepBench b = bench::bench_step(sc, backends, step_options_of(vm), origin_of(vm));
  std::cout << fmt::format("bench step: scenario {} ({} layers, S={}, {} GPU(s)) on profile {}\n", sc.name, sc.model.layers,
                           sc.plan.seq_len, sc.gpus, sc.hw.name);
  for (const auto& r : b.rows) {
    std::cout << fmt::format("  {}: {}\n", r.backend, r.m.device);
    note_other_gpu(sc, r.m.device);
  }
  std::cout << bench::step_bench_table(b) << bench::step_power_table(b);
  if (vm.count("json")) reports::write_file_atomic(vm["json"].as<std::string>(), bench::step_bench_json(b).dump(2) + "\n");
  return b.valid() ? core::kExitOk : core::kExitFailure;
}

int run_bench(int argc, char** argv) {
  po::options_description d("bench options");
  d.add_options()("help,h", "this help")("what", po::value<std::string>(), "exchange | attention | block | layer | step")(
      "slices", po::value<std::string>()->default_value("1,2,4"),
      "exchange: slice counts to time (pipelined pack/send); block: the first one (default ULYSSES_A2A_SLICES or 1)")(
      "peer", po::value<std::string>(), "JSON output of bench/peers/ulysses_peer.py from the same call: print ratios")(
      "json", po::value<std::string>(), "block: also write the measurement as JSON to this file (attention sweep: every row)")(
      "timeout", po::value<double>()->default_value(300), "watchdog seconds for a collective or a missing rank")(
      "backends", po::value<std::string>()->default_value("cuda,deepspeed"), "step: ours then the peer")(
      "layers", po::value<std::int64_t>(), "step: decoder layers to build (default: the model's)");
  add_runtime_options(d);
  add_attention_sweep_options(d);
  po::options_description s("scenario options (flags override the --scenario file)");
  add_scenario_options(s);
  d.add(s);
  po::positional_options_description pos;
  pos.add("what", 1);
  const auto vm = parse_args(argc, argv, d, &pos);
  if (vm.count("help") || !vm.count("what")) {
    print_help(argv[0],
               "exchange|attention|block|layer --scenario FILE [--seq-len N ...] [--slices 1,2,4] [--peer FILE]\n"
               "       step --scenario FILE [--layers N] [--backends cuda,deepspeed] [--json F]\n"
               "       attention --sweep | --quick | --points S:H:HKV:D:CAUSAL[,...] [--no-peer] [--json F] [--csv F]",
               "CUDA microbenchmarks, each validated before it is timed:\n"
               "  exchange   q,k,v seq->head exchange (pack + one NCCL group + unpack) vs a bare ncclAlltoAll and\n"
               "             a bare grouped send/recv of the same bytes; busbw = algbw*(P-1)/P as nccl-tests\n"
               "  attention  one rank's local attention (H/P heads, full S), fwd and bwd, flash and reference;\n"
               "             --sweep/--quick/--points: the flash kernel over a grid of shapes on one GPU, then\n"
               "             PyTorch flash (FA2) and cuDNN on the same points (bench/peers/attn_peer.py), ratios\n"
               "  block      the whole block (six phases) as `ulysses run --backend cuda`\n"
               "  layer      a decoder layer's kernels outside attention (RMSNorm, RoPE, SwiGLU, add) and its\n"
               "             projections on cuBLASLt, at one rank's shapes; rates against the profile's limits\n"
               "  step       our runtime's whole step next to the HF Accelerate + DeepSpeed step on the same scenario:\n"
               "             tokens/s per GPU (the ratio, target >= 1.3x), hardware and Megatron-style TFLOP/s and MFU",
               d);
    return vm.count("help") ? core::kExitOk : core::kExitInput;
  }
  const std::string what = vm["what"].as<std::string>();
  if (what != "exchange" && what != "attention" && what != "block" && what != "layer" && what != "step")
    throw core::InputError("", "bench", "'" + what + "' is not one of exchange, attention, block, layer, step");
  if (what == "step") return bench_step_cmd(vm);
  for (const char* k : {"layers"})
    if (vm.count(k)) throw core::InputError("", std::string("--") + k, "only bench step takes it");
  if (const auto points = attention_sweep_points(vm, what, s); !points.empty()) return attention_sweep_cmd(vm, points);
#ifdef ULYSSES_WITH_CUDA
  runtime::RunOptions opt = run_options_of(vm);
  opt.timeout_s = vm["timeout"].as<double>();
  if (!(opt.timeout_s > 0)) throw core::InputError("", "--timeout", "must be > 0 seconds");
  const Scenario sc = scenario_from_options(vm, true);
  const runtime::BlockShape shape = block_shape_checked(sc, vm, "cuda");
  if (what == "exchange") return bench_exchange_cmd(shape, opt, vm);
  if (what == "attention") return bench_attention_cmd(shape, opt);
  if (what == "layer") return bench_layer_cmd(sc, shape, opt);
  return bench_block_cmd(shape, opt, vm);
#else
  std::fprintf(stderr, "ulysses bench: this binary was built without the CUDA backend\n");
  return core::kExitFailure;
#endif
}

const RegisterCommand reg{"bench", "CUDA microbenchmarks: exchange, attention, block, layer (validated, then timed)", &run_bench};

}  // namespace
}  // namespace ulysses::cli
