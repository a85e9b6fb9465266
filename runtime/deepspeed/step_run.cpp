#include "runtime/deepspeed/step_run.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "sim/model.hpp"
#include "sim/config.hpp"
#include "core/errors.hpp"
#include "core/stats.hpp"

namespace ulysses::runtime::deepspeed {

namespace fs = std::filesystem;

namespace {

// What UlyssesSPAttentionHF / transformers can run (worker: ulysses_worker/job.py keeps the same list
// for a job written by hand; this is the one the CLI checks first).
constexpr const char* kAttn[] = {"sdpa", "flash_attention_2", "flash_attention_3", "flex_attention"};

std::string last_line(const std::string& path, const std::string& prefer) {
  std::ifstream f(path);
  std::string line, last, preferred;
  while (std::getline(f, line)) {
    if (line.empty()) continue;
    last = line;
    if (line.find(prefer) != std::string::npos) preferred = line;
  }
  return preferred.empty() ? last : preferred;
}

Json read_json(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error(fmt::format("deepspeed backend: the worker wrote no result '{}'", path));
  try {
    return Json::parse(f);
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("deepspeed backend: result '{}' is not JSON: {}", path, e.what()));
  }
}

std::string site_dir() {
  if (const char* s = std::getenv("ULYSSES_DEEPSPEED_SITE"); s && *s) return s;
  return repo_dir() + "/.alst/site";
}

struct Workdir {
  std::string path;
  Workdir() {
    std::string tmpl = (fs::temp_directory_path() / "ulysses-ds-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error(fmt::format("deepspeed backend: mkdtemp: {}", std::strerror(errno)));
    path = tmpl;
  }
};

// Writes the job, runs the worker, returns the rank result files (rank order) or throws.
std::vector<Json> launch(const Scenario& sc, const StepOptions& opt, const std::string& origin, bool probes) {
  Workdir wd;
  const std::string prefix = wd.path + "/result";
  Json job = job_json(sc, opt, prefix, origin);
  const std::string job_path = wd.path + "/job.json";
  {
    std::ofstream f(job_path);
    f << job.dump(1) << "\n";
    if (!f) throw std::runtime_error(fmt::format("deepspeed backend: cannot write '{}'", job_path));
  }
  const std::vector<std::string> argv = launch_argv(sc, job_path);
  const std::string log = wd.path + "/worker.log";
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(fmt::format("deepspeed backend: fork: {}", std::strerror(errno)));
  if (pid == 0) {
    if (sc.plan.expandable_segments) ::setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True", 1);
    else ::unsetenv("PYTORCH_CUDA_ALLOC_CONF");
    ::setenv("NCCL_NVLS_ENABLE", "0", 0);
    std::string pp = site_dir();
    if (const char* old = std::getenv("PYTHONPATH"); old && *old) pp += std::string(":") + old;
    ::setenv("PYTHONPATH", pp.c_str(), 1);
    FILE* out = std::freopen(log.c_str(), "w", stdout);
    if (out) ::dup2(::fileno(stdout), 2);
    std::vector<char*> a;
    for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    ::execvp(a[0], a.data());
    std::fprintf(stderr, "deepspeed backend: cannot start %s: %s\n", a[0], std::strerror(errno));
    std::_Exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  const std::string why = last_line(log, "deepspeed backend:");
  if (rc == 2) throw core::InputError(origin, "plan", why);
  if (rc == 3) throw StackMissing(why);
  // the rank files that exist: under torchrun a rank that ran out of memory exits at once (exit 4),
  // torchrun ends its peers (their files are missing) and reports its own failure code
  std::vector<Json> ranks;
  bool oom = rc == 4;
  for (std::int64_t r = 0; r < sc.gpus; ++r) {
    const std::string f = fmt::format("{}.rank{}.json", prefix, r);
    if (!fs::exists(f)) continue;
    Json j = read_json(f);
    oom = oom || j.value("status", "") == "oom" || j.value("oom_at", std::int64_t{0}) > 0;
    ranks.push_back(std::move(j));
  }
  if (oom && !probes) throw WorkerOutOfMemory(why);
  if (rc != 0 && !(oom && probes))
    throw std::runtime_error(fmt::format("deepspeed backend: the worker exited {} ({}); log: {}", rc, why, log));
  if (ranks.empty() || (!oom && static_cast<std::int64_t>(ranks.size()) != sc.gpus))
    throw std::runtime_error(fmt::format("deepspeed backend: {} of {} rank results written; log: {}", ranks.size(), sc.gpus, log));
  if (probes)  // the rank that ran out of memory (others may have stopped earlier or never written)
    std::stable_sort(ranks.begin(), ranks.end(), [](const Json& a, const Json& b) {
      return a.value("oom_at", std::int64_t{0}) > 0 && b.value("oom_at", std::int64_t{0}) == 0;
    });
  if (!std::getenv("ULYSSES_KEEP_WORKDIR")) fs::remove_all(wd.path);
  return ranks;
}

}  // namespace

Json job_json(const Scenario& sc, const StepOptions& opt, const std::string& out_prefix, const std::string& origin) {
  const Plan& p = sc.plan;
  if (p.kv_strategy != KvStrategy::replicate)
    throw core::InputError(origin, "plan.kv_strategy",
                     "the deepspeed backend runs DeepSpeed's UlyssesSPAttentionHF, which replicates kv heads: only "
                     "'replicate' (got send_once)");
  if (std::find(std::begin(kAttn), std::end(kAttn), p.attn_implementation) == std::end(kAttn))
    throw core::InputError(origin, "plan.attn_implementation",
                     fmt::format("the deepspeed backend runs sdpa, flash_attention_2, flash_attention_3 or flex_attention "
                                 "(got '{}')", p.attn_implementation));
  if (p.attn_implementation == "flex_attention" && p.sp_size > 1)
    throw core::InputError(origin, "plan.attn_implementation",
                     "Accelerate 1.15 refuses flex_attention for sequence parallelism; use sdpa or flash_attention_2");
  if (p.dp_replicate_size > 1)
    throw core::InputError(origin, "plan.dp_replicate_size",
                     fmt::format("DeepSpeed ZeRO shards over every data-parallel rank (no replicate groups): the "
                                 "deepspeed backend runs dp_replicate_size 1 (got {})", p.dp_replicate_size));
  if (p.pad_to_multiple_of > 0)
    throw core::InputError(origin, "plan.pad_to_multiple_of", "the deepspeed backend runs unpadded sequences (set 0)");
  if (p.rmsnorm_implementation != RmsNormImpl::eager)
    throw core::InputError(origin, "plan.rmsnorm_implementation", "the deepspeed backend runs HF's eager RMSNorm (set eager)");
  if (p.seq_len <= 0) throw core::InputError(origin, "plan.seq_len", "required to run a step (or pass --seq-len)");
  const ModelSpec& m = sc.model;
  Json j;
  j["schema"] = 1;
  j["scenario"] = sc.name;
  j["model"] = {{"name", m.name}, {"layers", m.layers}, {"hidden", m.hidden}, {"heads", m.heads},
                {"kv_heads", m.kv_heads}, {"head_dim", m.head_dim}, {"ffn_hidden", m.ffn_hidden}, {"vocab", m.vocab},
                {"tied_embeddings", m.tied_embeddings}, {"qk_norm", m.qk_norm}, {"qkv_bias", m.qkv_bias},
                {"rms_norm_eps", norm_eps_of(m)}, {"rope_theta", rope_theta_of(m)}};
  j["plan"] = {{"sp_size", p.sp_size}, {"dp_replicate_size", p.dp_replicate_size}, {"dp_shard_size", p.dp_shard_size},
               {"zero_stage", p.zero_stage}, {"offload_optimizer", p.offload_optimizer},
               {"offload_params", p.offload_params}, {"activation_checkpointing", p.activation_checkpointing},
               {"offload_checkpoints", p.offload_checkpoints}, {"tiled_logits", p.tiled_logits},
               {"tiled_mlp", p.tiled_mlp}, {"attn_implementation", p.attn_implementation},
               {"micro_batch_size", p.micro_batch_size}, {"seq_len", p.seq_len}, {"kv_strategy", "replicate"},
               {"reduce_bucket_size", p.reduce_bucket_size}, {"torch_adam", p.torch_adam}};
  j["gpus"] = sc.gpus;
  j["run"] = {{"warmup", opt.warmup}, {"iters", opt.iters}, {"seed", static_cast<std::int64_t>(opt.seed % (1ULL << 31))},
              {"expandable_segments", sc.plan.expandable_segments}, {"trace", opt.trace},
              {"probe_seq_lens", opt.probe_seq_lens}, {"ballast_bytes", opt.ballast_bytes}, {"calibrate", opt.calibrate}};
  if (!opt.op_seq_lens.empty())
    j["run"].update({{"op_seq_lens", opt.op_seq_lens}, {"op_adam_params", opt.op_adam_params},
                     {"op_cpu_adam_params", opt.op_cpu_adam_params}});
  j["out"] = out_prefix;
  return j;
}

std::vector<std::string> launch_argv(const Scenario& sc, const std::string& job_path) {
  const char* py = std::getenv("ULYSSES_PYTHON");
  const std::string python = py && *py ? py : "python3";
  const std::string worker = repo_dir() + "/runtime/deepspeed/worker.py";
  if (sc.gpus <= 1) return {python, worker, job_path};
  return {python, "-m", "torch.distributed.run", "--standalone", fmt::format("--nproc-per-node={}", sc.gpus), worker,
          job_path};
}

StepMeasurement measurement_of(const std::vector<Json>& ranks) {
  if (ranks.empty()) throw std::runtime_error("deepspeed backend: no rank results");
  StepMeasurement m;
  const Json& r0 = ranks[0];
  m.raw = r0;
  m.ranks = static_cast<int>(ranks.size());
  m.device = r0.value("device", "");
  m.alloc_conf = r0.value("pytorch_cuda_alloc_conf", "");
  m.versions = r0.value("versions", Json::object());
  // phases: first-seen order of rank 0's memory step, then any others of the timed steps
  std::vector<std::string> order;
  const Json mem0 = r0.value("memory_step", Json::object()).value("phases", Json::object());
  for (auto it = mem0.begin(); it != mem0.end(); ++it) order.push_back(it.key());
  const Json ph0 = r0.value("phases", Json::object());
  for (auto it = ph0.begin(); it != ph0.end(); ++it)
    if (std::find(order.begin(), order.end(), it.key()) == order.end()) order.push_back(it.key());
  for (const auto& name : order) {
    StepPhase s;
    s.name = name;
    bool first = true;
    for (const Json& r : ranks) {
      const Json ph = r.value("phases", Json::object());
      if (ph.contains(name)) {
        const auto v = ph[name].get<std::vector<double>>();
        s.median_s = std::max(s.median_s, core::median(v));
        const double lo = *std::min_element(v.begin(), v.end()), hi = *std::max_element(v.begin(), v.end());
        s.min_s = first ? lo : std::min(s.min_s, lo);
        s.max_s = std::max(s.max_s, hi);
        first = false;
      }
      const Json mm = r.value("memory_step", Json::object()).value("phases", Json::object());
      if (mm.contains(name)) {
        s.alloc_start_bytes = std::max(s.alloc_start_bytes, mm[name].value("start", std::int64_t{0}));
        s.peak_bytes = std::max(s.peak_bytes, mm[name].value("peak", std::int64_t{0}));
        s.peak_reserved_bytes = std::max(s.peak_reserved_bytes, mm[name].value("peak_reserved", std::int64_t{0}));
      }
      const Json hp = r.value("phases_host", Json::object());
      if (hp.contains(name)) {
        const auto v = hp[name].get<std::vector<double>>();
        if (!v.empty()) s.host_s = std::max(s.host_s, core::median(v));
      }
      const Json kb = r.value("kernels_by_phase", Json::object());
      if (kb.contains(name)) s.kernel_s = std::max(s.kernel_s, kb[name].value("kernel_s", 0.0));
    }
    m.phases.push_back(s);
  }
  bool first = true;
  for (const Json& r : ranks) {
    std::vector<double> st;
    for (const auto& s : r.value("steps", Json::array())) st.push_back(s.value("step_s", 0.0));
    if (!st.empty()) {
      m.step_median_s = std::max(m.step_median_s, core::median(st));
      const double lo = *std::min_element(st.begin(), st.end()), hi = *std::max_element(st.begin(), st.end());
      m.step_min_s = first ? lo : std::min(m.step_min_s, lo);
      m.step_max_s = std::max(m.step_max_s, hi);
      first = false;
    }
    m.max_memory_allocated = std::max(m.max_memory_allocated, r.value("max_memory_allocated", std::int64_t{0}));
    m.max_memory_reserved = std::max(m.max_memory_reserved, r.value("max_memory_reserved", std::int64_t{0}));
    m.device_used_bytes = std::max(m.device_used_bytes, r.value("device_used_bytes", std::int64_t{0}));
  }
  for (const Json& r : ranks) {
    std::vector<StepMeasurement::Segment> t;
    for (const auto& s : r.value("timeline", Json::array()))
      t.push_back({s.at(0).get<std::string>(), s.at(1).get<double>(), s.at(2).get<double>()});
    m.timeline.push_back(std::move(t));
  }
  m.peak_at = r0.value("memory_step", Json::object()).value("peak_at", "");
  m.host_rss_bytes = r0.value("host_rss_bytes", std::int64_t{0});
  m.host_rss_peak_bytes = r0.value("host_rss_peak_bytes", std::int64_t{0});
  m.pinned_bytes = r0.value("checkpoint_pinned_bytes", std::int64_t{0});
  m.losses = step_losses_of(r0);
  m.wall_s = r0.value("wall_s", 0.0);
  // the worker's energy counter per rank (ulysses_worker/energy.py): the sum over ranks, if every rank read it
  double joules = 0;
  for (const Json& r : ranks) {
    const Json e = r.value("energy_j_per_step", Json(nullptr));
    joules = e.is_number() && joules >= 0 ? joules + e.get<double>() : -1;
  }
  m.energy_j_per_step = joules;
  return m;
}

StepMeasurement run_step(const Scenario& sc, const StepOptions& opt, const std::string& origin) {
  StepMeasurement m = measurement_of(launch(sc, opt, origin, false));
  m.layers = sc.model.layers;
  m.seq_len = sc.plan.seq_len;
  return m;
}

ProbeResult run_probes(const Scenario& sc, const StepOptions& opt, const std::string& origin) {
  const Json r0 = launch(sc, opt, origin, true).at(0);
  ProbeResult out;
  for (const auto& p : r0.value("probes", Json::array()))
    out.fits.push_back({p.value("seq_len", std::int64_t{0}), p.value("max_memory_allocated", std::int64_t{0}),
                        p.value("max_memory_reserved", std::int64_t{0})});
  out.oom_at = r0.value("oom_at", std::int64_t{0});
  return out;
}

FixedCosts run_fixed_costs(const Scenario& sc, const std::string& origin, const StepOptions& opt) {
  StepOptions o;
  o.calibrate = true;
  o.op_seq_lens = opt.op_seq_lens, o.op_adam_params = opt.op_adam_params, o.op_cpu_adam_params = opt.op_cpu_adam_params;
  const std::vector<Json> ranks = launch(sc, o, origin, false);
  FixedCosts f;
  f.ranks = static_cast<int>(ranks.size());
  f.device = ranks.at(0).value("device", "");
  f.versions = ranks.at(0).value("versions", Json::object());
  f.device_total_bytes = ranks.at(0).value("hbm_bytes", std::int64_t{0});
  for (const Json& r : ranks) {
    f.outside_allocator_bytes = std::max(f.outside_allocator_bytes, r.value("outside_allocator_bytes", std::int64_t{0}));
    f.outside_before_setup_bytes =
        std::max(f.outside_before_setup_bytes, r.value("outside_allocator_bytes_before_setup", std::int64_t{0}));
  }
  if (f.outside_allocator_bytes <= 0 || f.device_total_bytes <= 0)
    throw std::runtime_error("deepspeed backend: the worker reported no fixed-cost measurement");
  if (const Json pc = ranks.at(0).value("phase_clock", Json::object()); pc.is_object() && pc.contains("gpu_s")) {
    const Json gpu = pc.at("gpu_s"), host = pc.value("host_s", Json::object());
    for (auto it = gpu.begin(); it != gpu.end(); ++it)
      f.phase_clock.push_back({it.key(), it.value().get<double>(), host.value(it.key(), 0.0)});
    for (auto it = host.begin(); it != host.end(); ++it)  // host time in a phase without GPU events (none expected)
      if (!gpu.contains(it.key())) f.phase_clock.push_back({it.key(), 0.0, it.value().get<double>()});
    f.phase_clock_step_s = pc.value("step_s", 0.0), f.phase_clock_wall_s = pc.value("wall_s", 0.0);
  }
  if (!o.op_seq_lens.empty()) {
    if (!ranks.at(0).contains("ops")) throw std::runtime_error("deepspeed backend: the worker reported no op bench");
    f.ops = op_bench_of(ranks.at(0).at("ops"));
    f.has_ops = true;
  }
  return f;
}

}  // namespace ulysses::runtime::deepspeed
