// The deepspeed backend without a GPU or DeepSpeed: the job file, refusals of what the stack cannot
// run, the missing-stack message, and the stored records re-predicted through the binary (the eval/
// functions themselves: tests/eval/test_step_eval.cpp).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "tests/cli/run_cli.hpp"
#include "eval/step_capacity.hpp"
#include "reports/file_out.hpp"
#include <fmt/format.h>
#include <algorithm>
#include "runtime/deepspeed/step_run.hpp"
#include "sim/config.hpp"
#include "core/errors.hpp"
#include "sim/predict.hpp"

using namespace ulysses;
using Keys = std::vector<std::pair<std::string, std::string>>;
using ulysses::test::run_cli;
using ulysses::test::record_path;
using ulysses::test::source_path;
namespace rd = ulysses::runtime::deepspeed;

namespace {
Scenario llama2(std::int64_t S) {
  Scenario sc;
  sc.model = load_model("llama-3.1-8b");
  sc.hw = load_profile("h200-sxm-141gb");
  sc.model.layers = 2;
  sc.plan.seq_len = S;
  sc.plan.attn_implementation = "sdpa";
  sc.name = "t";
  return sc;
}
// A stand-in for the worker (ULYSSES_PYTHON): `body` reads `job` (the job file, parsed) and writes
// the result the worker's format documents. Returns the environment prefix of a command line.
std::string stand_in_worker(const ulysses::test::TempDir& dir, const std::string& body) {
  {
    std::ofstream f(dir / "python");
    f << "#!/usr/bin/env python3\nimport json, sys\njob = json.load(open(sys.argv[-1]))\n" << body;
  }
  std::filesystem::permissions(dir / "python", std::filesystem::perms::owner_all);
  return "ULYSSES_PYTHON='" + (dir / "python") + "' ";
}
const std::string kFlags =
    "--model llama-3.1-8b --profile h200-sxm-141gb --gpus 1 --sp-size 1 --seq-len 16384 --attn-implementation sdpa";
// a stand-in worker's fixed-cost result (calibrate --backend deepspeed): the context outside the allocator, the HBM
const std::string kFixedCosts =
    "res = {'status': 'ok', 'device': 'stand-in', 'outside_allocator_bytes': 1385000000, 'hbm_bytes': 150109880320,\n"
    "       'outside_allocator_bytes_before_setup': 600000000}\n";
}  // namespace

TEST_CASE("deepspeed job: the plan as the worker reads it", "[deepspeed]") {
  Scenario sc = llama2(16384);
  sc.plan.tiled_mlp = true;
  rd::StepOptions o;
  o.iters = 4;
  const auto j = rd::job_json(sc, o, "/tmp/x", "f.yaml");
  CHECK(j["schema"] == 1);
  CHECK(j["model"]["layers"] == 2);
  CHECK(j["model"]["kv_heads"] == 8);
  CHECK(j["plan"]["tiled_mlp"] == true);
  CHECK(j["plan"]["zero_stage"] == 3);
  CHECK(j["run"]["iters"] == 4);
  CHECK(j["gpus"] == 1);
  CHECK(j["out"] == "/tmp/x");
}

TEST_CASE("deepspeed job: plans the stack cannot run are refused naming the key", "[deepspeed]") {
  Scenario sc = llama2(16384);
  sc.plan.kv_strategy = KvStrategy::send_once;
  CHECK_THROWS_WITH(rd::job_json(sc, {}, "/tmp/x", "f.yaml"), Catch::Contains("f.yaml: plan.kv_strategy"));
  sc = llama2(16384);
  sc.plan.attn_implementation = "ulysses_flash";
  CHECK_THROWS_WITH(rd::job_json(sc, {}, "/tmp/x", "f.yaml"), Catch::Contains("plan.attn_implementation"));
  sc = llama2(16384);
  sc.plan.pad_to_multiple_of = 128;
  CHECK_THROWS_AS(rd::job_json(sc, {}, "/tmp/x", "f.yaml"), core::InputError);
  sc = llama2(16384);
  sc.plan.dp_replicate_size = 2;
  sc.gpus = 2;
  CHECK_THROWS_WITH(rd::job_json(sc, {}, "/tmp/x", "f.yaml"), Catch::Contains("plan.dp_replicate_size"));
  sc = llama2(16384);
  sc.plan.attn_implementation = "flex_attention";
  CHECK_NOTHROW(rd::job_json(sc, {}, "/tmp/x", "f.yaml"));  // sp 1: Accelerate is not asked
  sc.plan.sp_size = 2;
  sc.gpus = 2;
  CHECK_THROWS_WITH(rd::job_json(sc, {}, "/tmp/x", "f.yaml"), Catch::Contains("flex_attention"));
}

TEST_CASE("deepspeed CLI: bad input is one line and exit 2", "[deepspeed]") {
  auto r = run_cli("run --backend deepspeed " + kFlags + " --kv-strategy send_once");
  CHECK(r.rc == 2);
  CHECK(r.err.find("plan.kv_strategy") != std::string::npos);
  CHECK(ulysses::test::count_lines(r.err) == 1);
  r = run_cli("run --backend deepspeed " + kFlags + " --layers 0");
  CHECK(r.rc == 2);
  CHECK(r.err.find("--layers") != std::string::npos);
  r = run_cli("run --backend cpu --scenario " + source_path("scenarios/cpu-tiny.yaml") + " --layers 2");
  CHECK(r.rc == 2);
  CHECK(r.err.find("only whole steps take it") != std::string::npos);
}

TEST_CASE("deepspeed CLI: a missing stack is one line naming the install script, exit 1", "[deepspeed]") {
  ulysses::test::TempDir site;
  {  // a site folder whose torch cannot be imported, whatever the machine has
    std::ofstream f(site / "torch.py");
    f << "raise ImportError('no torch in this test')\n";
  }
  const std::string env = "ULYSSES_DEEPSPEED_SITE='" + site.path.string() + "' ";
  const std::string cmd = env + "'" + ULYSSES_BIN + "' run --backend deepspeed " + kFlags + " --layers 2 2>'" +
                          (site / "err") + "' >/dev/null";
  const int status = std::system(cmd.c_str());
  CHECK(WEXITSTATUS(status) == 1);
  const std::string err = ulysses::test::slurp(site / "err");
  CHECK(err.find("install-stack.sh") != std::string::npos);
  CHECK(ulysses::test::count_lines(err) == 1);
}

TEST_CASE("deepspeed records: the committed H200 step record re-predicts, and follows its measurements", "[deepspeed]") {
  // records/validation/h200-alst.json: 16 whole-step cases on one H200 (docs/VALIDATION.md "Whole steps")
  const std::string rec = record_path("validation/h200-alst.json");
  ulysses::test::TempDir dir;
  const auto re = rd::Json::parse(ulysses::test::repredict_stored(rec, dir, "re.json"));
  REQUIRE(re["cases"].size() == 16);
  CHECK(re["summary"]["max_memory_allocated"]["cases"] == 16);
  // every case run with expandable segments has its reserved bytes from the generated allocation sequence
  CHECK(re["summary"]["max_memory_reserved_from_allocation_sequence"]["cases"] == 13);
  // issue 12's targets on this record: memory median 3 % / max 6 % (allocated, and reserved under expandable
  // segments), step time median 10 %
  for (const char* q : {"max_memory_allocated", "max_memory_reserved"}) {
    INFO(q);
    CHECK(re["summary"][q]["median_abs_error_pct"].get<double>() <= 3.0);
    CHECK(re["summary"][q]["max_abs_error_pct"].get<double>() <= 6.0);
  }
  CHECK(re["summary"]["step"]["median_abs_error_pct"].get<double>() <= 10.0);
  // every case's allocated error follows from its stored measurement and today's prediction
  for (const auto& c : re["cases"]) {
    const auto& a = c["comparison"]["max_memory_allocated"];
    CHECK(a["measured"].get<double>() == double(c["measured"]["max_memory_allocated"].get<std::int64_t>()));
    CHECK(a["error_pct"].get<double>() ==
          Approx((a["predicted"].get<double>() - a["measured"].get<double>()) / a["measured"].get<double>() * 100));
  }
  // a measurement changed in the record moves its error: the re-prediction reads the record
  auto j = rd::Json::parse(ulysses::test::slurp(rec));
  const auto before = re["cases"][0]["comparison"]["max_memory_allocated"]["error_pct"].get<double>();
  j["cases"][0]["measured"]["max_memory_allocated"] = j["cases"][0]["measured"]["max_memory_allocated"].get<std::int64_t>() * 2;
  { std::ofstream(dir / "drift.json") << j.dump(); }
  const auto re2 = rd::Json::parse(ulysses::test::repredict_stored(dir / "drift.json", dir, "re2.json"));
  CHECK(re2["cases"][0]["comparison"]["max_memory_allocated"]["error_pct"].get<double>() ==
        Approx((before / 100 + 1) / 2 * 100 - 100));
  // a broken case is one line naming the file and the case
  j["cases"][1].erase("measured");
  { std::ofstream(dir / "broken.json") << j.dump(); }
  const auto r = run_cli("validate --stored '" + (dir / "broken.json") + "'");
  CHECK(r.rc == 2);
  CHECK(r.err.find("cases[1]") != std::string::npos);
  CHECK(ulysses::test::count_lines(r.err) == 1);
}

TEST_CASE("deepspeed records: a record run with --profile re-predicts with that profile, a foreign path falls back", "[deepspeed]") {
  // records/validation/h100-alst.json: six cases of the H200 set run on one H100 with --profile h100-sxm-80gb
  const std::string rec = record_path("validation/h100-alst.json");
  const auto r = run_cli("validate --stored '" + rec + "'");
  INFO(r.err);
  CHECK(r.rc == 0);
  CHECK(r.out.find("re-predicted with profile h100-sxm-80gb") != std::string::npos);
  CHECK(r.err.empty());
  ulysses::test::TempDir dir;
  const auto re = rd::Json::parse(ulysses::test::repredict_stored(rec, dir, "re.json"));
  REQUIRE(re["cases"].size() == 6);
  CHECK(re["profile"] == "h100-sxm-80gb");
  CHECK(re["summary"]["max_memory_allocated"]["max_abs_error_pct"].get<double>() <= 3.0);
  // the H100's step times follow from the H100 profile (the H200's misses them by 7-9 %)
  CHECK(re["summary"]["step"]["max_abs_error_pct"].get<double>() <= 5.0);
  // --profile still overrides it
  const auto o = run_cli("validate --stored '" + rec + "' --profile h200-sxm-141gb");
  CHECK(o.out.find("re-predicted with profile h200-sxm-141gb") != std::string::npos);
  // a profile_used file that is not here (a path on the measuring machine): the set's profile, one line saying so
  auto j = rd::Json::parse(ulysses::test::slurp(rec));
  auto with_used = [&](const std::string& name, const std::string& used) {
    j["profile_used"] = used;
    std::ofstream(dir / name) << j.dump();
    return run_cli("validate --stored '" + (dir / name) + "'");
  };
  const auto f = with_used("foreign.json", "/root/out/gone/h100.yaml");
  CHECK(f.rc == 0);  // a result (issue 12's targets: memory, and the step's median within 10 %), not an error
  CHECK(f.out.find("re-predicted with profile h200-sxm-141gb") != std::string::npos);
  CHECK(f.err.find("profile_used /root/out/gone/h100.yaml is a file not found here") != std::string::npos);
  CHECK(ulysses::test::count_lines(f.err) == 1);
  // an inline map and a file next to the record load as --profile would
  const auto m = with_used("inline.json", "{base: h100-sxm-80gb, cuda_context_GiB: 1.5}");
  CHECK(m.rc == 0);
  CHECK(m.out.find("re-predicted with profile {base: h100-sxm-80gb") != std::string::npos);
  std::filesystem::copy_file(source_path("profiles/h100-sxm-80gb.yaml"), dir / "h100local.yaml");
  const auto l = with_used("local.json", "h100local.yaml");
  CHECK(l.rc == 0);
  CHECK(l.err.empty());
  // a typo in a preset name or a broken profile file is an error of its own (one line, exit 2), not a fallback
  const auto t = with_used("typo.json", "h100-sxm-80gbb");
  CHECK(t.rc == 2);
  CHECK(t.err.find("did you mean 'h100-sxm-80gb'") != std::string::npos);
  CHECK(ulysses::test::count_lines(t.err) == 1);
  std::ofstream(dir / "broken.yaml") << ulysses::test::slurp(source_path("profiles/a100-sxm-80gb.yaml")) << "hbm_GiB: -3\n";
  const auto b = with_used("broken-used.json", "broken.yaml");
  CHECK(b.rc == 2);
  CHECK(ulysses::test::count_lines(b.err) == 1);
  // no set profile to fall back to
  j.erase("profile");
  const auto n = with_used("noset.json", "/root/out/gone/h100.yaml");
  CHECK(n.rc == 2);
  CHECK(n.err.find("profile_used") != std::string::npos);
  CHECK(ulysses::test::count_lines(n.err) == 1);
}

TEST_CASE("deepspeed records: the committed capacity record re-predicts the planner under its ballast", "[deepspeed]") {
  const std::string rec = record_path("validation/h200-alst-capacity.json");
  const auto r = run_cli("capacity --stored '" + rec + "' --max-error-pct -1");
  INFO(r.err);
  CHECK(r.rc == 0);  // target off: the table only
  CHECK(r.out.find("llama8b-l2-tlog") != std::string::npos);
  // the predicted column is the planner's with HBM less the ballast (eval/step_capacity.hpp)
  const auto j = rd::Json::parse(ulysses::test::slurp(rec));
  const auto& c = j["cases"][0];
  Keys keys;
  for (const auto& kv : c["keys"]) keys.emplace_back(kv[0].get<std::string>(), kv[1].get<std::string>());
  Scenario sc;  // as the record's case builds it: presets, then every set_key key (run.* are worker options)
  set_key(sc, "model", j["model"].get<std::string>(), rec);
  set_key(sc, "profile", j["profile"].get<std::string>(), rec);
  for (const auto& kv : keys)
    if (kv.first.rfind("run.", 0) != 0) set_key(sc, kv.first, kv.second, rec);
  validate(sc, rec);
  const auto pr = eval::predicted_step_capacity(sc, c["ballast_bytes"].get<std::int64_t>(), j["granularity"].get<std::int64_t>());
  CHECK(r.out.find(fmt::format(" {} ", pr.max_seq_len)) != std::string::npos);
  CHECK(pr.max_seq_len > 0);
}

TEST_CASE("calibrate --backend deepspeed writes the PyTorch fixed cost next to the existing calibration", "[deepspeed]") {
  // a stand-in for the worker (ULYSSES_PYTHON): answers the calibrate job as the worker's result format says
  ulysses::test::TempDir dir;
  const std::string env = stand_in_worker(dir,
         "assert job['run']['calibrate'] is True and job['plan']['zero_stage'] == 3\n" + kFixedCosts +
         "lens = job['run'].get('op_seq_lens', [])\n"
         "if lens:  # the op bench: attention at 40 % of 989.4 TFLOP/s forward, GEMMs at 70 %, AdamW 3 ns, CPU Adam 1 ns\n"
         "    m = job['model']\n"
         "    att = lambda S: 4.0 * S * S * m['heads'] * m['head_dim'] / 2\n"
         "    res['ops'] = {'attention': [{'impl': 'sdpa', 'S': S, 'H': m['heads'], 'H_kv': m['kv_heads'], 'D': m['head_dim'],\n"
         "                                 'causal': True, 'fwd_s': att(S) / (0.4 * 989.4e12),\n"
         "                                 'bwd_s': 2.5 * att(S) / (0.35 * 989.4e12)} for S in lens],\n"
         "                  'gemm': [{'op': 'q.fwd', 'M': S, 'N': 4096, 'K': 4096, 's': 2.0 * S * 4096 * 4096 / (0.7 * 989.4e12)}\n"
         "                           for S in lens],\n"
         "                  }\n"
         "    if job['run']['op_adam_params']:  # as the worker: an optimizer asked with 0 parameters is not timed\n"
         "        res['ops']['adamw'] = {'params': job['run']['op_adam_params'], 's': 3e-9 * job['run']['op_adam_params']}\n"
         "    if job['run']['op_cpu_adam_params']:\n"
         "        res['ops']['cpu_adam'] = {'params': job['run']['op_cpu_adam_params'], 's': 1e-9 * job['run']['op_cpu_adam_params'], 'threads': 16}\n"
         "json.dump(res, open(job['out'] + '.rank0.json', 'w'))\n");
  const std::string out = dir / "h200.yaml";
  int rc = std::system((env + "'" + ULYSSES_BIN + "' calibrate --backend deepspeed --profile h200-sxm-141gb --profile-out '" +
                        out + "' >/dev/null 2>&1").c_str());
  REQUIRE(WEXITSTATUS(rc) == 0);
  const HardwareProfile p = load_profile(out);
  const HardwareProfile base = load_profile("h200-sxm-141gb");
  // what the process cannot allocate: used outside the allocator + the profile's HBM above the CUDA total
  const std::int64_t held = 1385000000 + (base.hbm_bytes - 150109880320);
  CHECK(base.hbm_bytes > 150109880320);
  CHECK(std::llabs(p.calibrated.pytorch_context_bytes - held) < 1024);
  CHECK(p.calibrated.cuda_context_bytes == base.calibrated.cuda_context_bytes);  // the CUDA runtime's stays
  // the op bench (default lengths 4Ki..64Ki): a new sdpa curve per shape, the GEMM curve, the optimizers
  const auto is_sdpa = [](const auto& kc) { return kc.first == "sdpa@d128.causal.h32"; };
  const bool had = std::any_of(base.calibrated.attn_fwd_eff.begin(), base.calibrated.attn_fwd_eff.end(), is_sdpa);
  CHECK(p.calibrated.attn_fwd_eff.size() == base.calibrated.attn_fwd_eff.size() + (had ? 0 : 1));  // replaced or added
  const auto sdpa = std::find_if(p.calibrated.attn_fwd_eff.begin(), p.calibrated.attn_fwd_eff.end(), is_sdpa);
  REQUIRE(sdpa != p.calibrated.attn_fwd_eff.end());
  REQUIRE(sdpa->second.points.size() == 4);
  CHECK(sdpa->second.points[0].first == 4096);
  CHECK(sdpa->second.points[3].second == Approx(0.4).epsilon(1e-4));  // written with 6 digits
  REQUIRE(p.calibrated.gemm_eff.points.size() == 4);
  CHECK(p.calibrated.gemm_eff.points[1].second == Approx(0.7).epsilon(1e-4));
  CHECK(p.calibrated.torch_adamw_s_per_param == Approx(3e-9).epsilon(1e-4));
  CHECK(p.calibrated.cpu_adam_s_per_param == Approx(1e-9).epsilon(1e-4));
  const std::string none = dir / "none.yaml";
  rc = std::system((env + "'" + ULYSSES_BIN + "' calibrate --backend deepspeed --profile h200-sxm-141gb --op-seq-lens none "
                    "--profile-out '" + none + "' >/dev/null 2>&1").c_str());
  REQUIRE(WEXITSTATUS(rc) == 0);
  CHECK(load_profile(none).calibrated.attn_fwd_eff.size() == base.calibrated.attn_fwd_eff.size());
  CHECK(load_profile(none).calibrated.torch_adamw_s_per_param == base.calibrated.torch_adamw_s_per_param);  // kept as it was
  // an optimizer asked with 0 parameters is not timed: its key stays as the profile had it
  const std::string no_adam = dir / "no_adam.yaml";
  rc = std::system((env + "'" + ULYSSES_BIN + "' calibrate --backend deepspeed --profile h200-sxm-141gb --op-adam-params 0 "
                    "--profile-out '" + no_adam + "' >/dev/null 2>&1").c_str());
  REQUIRE(WEXITSTATUS(rc) == 0);
  CHECK(load_profile(no_adam).calibrated.torch_adamw_s_per_param == base.calibrated.torch_adamw_s_per_param);
  CHECK(load_profile(no_adam).calibrated.cpu_adam_s_per_param == Approx(1e-9).epsilon(1e-4));
  // the model uses it for plan.runtime pytorch (the default), not for ulysses
  Scenario sc = llama2(16384);
  sc.hw = p;
  CHECK(std::llabs(predict(sc).gpu.get("cuda_context") - held) < 1024);
  sc.plan.runtime = Runtime::ulysses;
  CHECK(predict(sc).gpu.get("cuda_context") == base.calibrated.cuda_context_bytes);
  // P > 1 needs the one-GPU context first: one line, exit 2 (a100-sxm-80gb has no calibrated section)
  const auto r = run_cli("calibrate --backend deepspeed --profile a100-sxm-80gb --gpus 2");
  CHECK(r.rc == 2);
  CHECK(r.err.find("--gpus") != std::string::npos);
}

TEST_CASE("calibrate --backend deepspeed prints the set-up step's phase clock (GPU and host per phase) when the worker has one",
          "[deepspeed]") {
  ulysses::test::TempDir dir;
  const std::string body =
      kFixedCosts +
      "if CLOCK:\n"
      "    res['phase_clock'] = {'seq_len': 4096, 'step_s': 0.05, 'wall_s': 0.08,\n"
      "                          'gpu_s': {'attn.fwd': 0.004, 'mlp.bwd': 0.010, 'other': 0.001},\n"
      "                          'host_s': {'attn.fwd': 0.001, 'mlp.bwd': 0.030, 'other': 0.002}}\n"
      "json.dump(res, open(job['out'] + '.rank0.json', 'w'))\n";
  const auto run = [&](bool clock) {
    ulysses::test::TempDir d;
    const std::string env = stand_in_worker(d, std::string("CLOCK = ") + (clock ? "True" : "False") + "\n" + body);
    const std::string out = d / "out.txt";
    const int rc = std::system((env + "'" + ULYSSES_BIN + "' calibrate --backend deepspeed --profile h200-sxm-141gb --op-seq-lens none "
                                "--profile-out '" + std::string(d / "p.yaml") + "' >'" + out + "' 2>&1").c_str());
    INFO(ulysses::test::slurp(out));
    REQUIRE(WEXITSTATUS(rc) == 0);
    return ulysses::test::slurp(out);
  };
  const std::string with = run(true);
  CHECK(with.find("phase clock of the second step (llama-3.1-8b x1 layers, S=4096): GPU 50.00 ms, host 80.00 ms") != std::string::npos);
  // by GPU time, host/GPU: the host set mlp.bwd's pace
  const auto mlp = with.find("   mlp.bwd"), attn = with.find("   attn.fwd");
  REQUIRE(mlp != std::string::npos);
  REQUIRE(attn != std::string::npos);
  CHECK(mlp < attn);
  CHECK(with.find("10.000     30.000      3.00", mlp) != std::string::npos);
  CHECK(with.find("(ms)") != std::string::npos);  // the units row
  CHECK(run(false).find("phase clock") == std::string::npos);
}

TEST_CASE("calibrate --backend deepspeed: the set-up step with tiled logits, TiledMLP and checkpoint offload when asked",
          "[deepspeed]") {
  ulysses::test::TempDir d;
  // the stand-in fails unless the job's plan has the three features (and only when asked)
  const std::string env = stand_in_worker(d,
      "import os\nWANT = os.environ['WANT'] == '1'\npl = job['plan']\n"
      "assert (pl['tiled_logits'], pl['tiled_mlp'], pl['offload_checkpoints']) == (WANT, WANT, WANT), pl\n" +
      kFixedCosts +
      "res['phase_clock'] = {'seq_len': 4096, 'step_s': 0.05, 'wall_s': 0.08, 'gpu_s': {'logits.fwd': 0.004},\n"
      "                      'host_s': {'logits.fwd': 0.006}}\n"
      "json.dump(res, open(job['out'] + '.rank0.json', 'w'))\n");
  const auto run = [&](bool want, const std::string& flags) {
    const std::string out = d / "out.txt";
    const int rc = std::system(("WANT=" + std::string(want ? "1" : "0") + " " + env + "'" + ULYSSES_BIN +
                                "' calibrate --backend deepspeed --profile h200-sxm-141gb --op-seq-lens none " + flags + " >'" + out +
                                "' 2>&1").c_str());
    INFO(ulysses::test::slurp(out));
    CHECK(WEXITSTATUS(rc) == 0);
    return ulysses::test::slurp(out);
  };
  const std::string with = run(true, "--tiled-logits --tiled-mlp --offload-checkpoints");
  CHECK(with.find("(llama-3.1-8b x1 layers, S=4096, tiled logits, TiledMLP, checkpoint offload)") != std::string::npos);
  CHECK(with.find("S=4096, tiled logits, TiledMLP, checkpoint offload;") != std::string::npos);  // in the provenance
  // the host's time per logits tile: 6 ms over the 2 tiles of 4096 x 128256 fp32 logits (1 GiB each at most)
  CHECK(with.find("pytorch_host_logits_tile_ms: 3\n") != std::string::npos);
  const std::string without = run(false, "");
  CHECK(without.find("(llama-3.1-8b x1 layers, S=4096): GPU") != std::string::npos);
  CHECK(without.find("pytorch_host_logits_tile_ms") == std::string::npos);
}

TEST_CASE("calibrate --backend deepspeed --tiled-logits: no host time for the loss is an error, no profile", "[deepspeed]") {
  ulysses::test::TempDir d;
  // a worker whose phase clock lacks logits.fwd: the host time per tile cannot be derived
  const std::string env = stand_in_worker(d, kFixedCosts +
      "res['phase_clock'] = {'seq_len': 4096, 'step_s': 0.05, 'wall_s': 0.08, 'gpu_s': {'mlp.fwd': 0.004},\n"
      "                      'host_s': {'mlp.fwd': 0.006}}\n"
      "json.dump(res, open(job['out'] + '.rank0.json', 'w'))\n");
  const std::string prof = d / "p.yaml", out = d / "out.txt";
  const int rc = std::system((env + "'" + ULYSSES_BIN + "' calibrate --backend deepspeed --profile h200-sxm-141gb --op-seq-lens none "
                              "--tiled-logits --profile-out '" + prof + "' >'" + out + "' 2>&1").c_str());
  const std::string text = ulysses::test::slurp(out);
  INFO(text);
  CHECK(WEXITSTATUS(rc) != 0);
  CHECK(text.find("no host time for logits.fwd") != std::string::npos);
  CHECK(!std::filesystem::exists(prof));
}

TEST_CASE("compare --backend deepspeed: table, JSON and the predicted-vs-measured trace from the worker's result", "[deepspeed]") {
  // a stand-in for the worker that writes a result of the documented format (docs/DEEPSPEED_BACKEND.md)
  ulysses::test::TempDir dir;
  const std::string env = stand_in_worker(dir,
         "ph = {'gemm.qkv.fwd': [0.010, 0.012], 'attn.fwd': [0.020, 0.022], 'optimizer.step': [0.05, 0.05], 'other': [0.001, 0.001]}\n"
         "res = {'status': 'ok', 'device': 'stand-in', 'phases': ph, 'steps': [{'step_s': 0.09}, {'step_s': 0.1}],\n"
         "       'memory_step': {'phases': {'attn.fwd': {'start': 10, 'peak': 20, 'peak_reserved': 30}}, 'peak_at': 'attn.fwd'},\n"
         "       'max_memory_allocated': 1000, 'max_memory_reserved': 1200, 'losses': [11.9, 11.8],\n"
         "       'timeline': [['gemm.qkv.fwd', 0.0, 0.011], ['attn.fwd', 0.011, 0.021], ['optimizer.step', 0.032, 0.05]]}\n"
         "json.dump(res, open(job['out'] + '.rank0.json', 'w'))\n"
         "if job['run']['trace']:\n    json.dump({'traceEvents': []}, open(job['run']['trace'] + '.rank0.json', 'w'))\n");
  const std::string trace = dir / "t.json";
  const std::string cmd = env + "'" + ULYSSES_BIN + "' compare --backend deepspeed " + kFlags + " --layers 2 --format json --trace '" +
                          trace + "' >'" + (dir / "out.json") + "' 2>'" + (dir / "err") + "'";
  const int rc = std::system(cmd.c_str());
  INFO(ulysses::test::slurp(dir / "err"));
  REQUIRE(WEXITSTATUS(rc) == 0);
  const auto j = rd::Json::parse(ulysses::test::slurp(dir / "out.json"));
  CHECK(j["step"]["measured"].get<double>() == Approx(0.095));
  CHECK(j["max_memory_allocated"]["measured"].get<double>() == 1000);
  CHECK(j["measurement"]["phases"].size() == 4);
  const auto t = rd::Json::parse(ulysses::test::slurp(trace));
  int measured_spans = 0, predicted_spans = 0;
  for (const auto& e : t["traceEvents"])
    if (e["ph"] == "X") (e["pid"] == 1 ? predicted_spans : measured_spans) += 1;
  CHECK(measured_spans == 3);
  CHECK(predicted_spans > 5);  // the step model's non-zero phases
  CHECK(std::filesystem::exists(trace + ".cupti.json"));  // torch.profiler's, beside it
  CHECK(j["measurement"]["correct"] == true);
  CHECK(ulysses::test::slurp(dir / "err").find("note: measured on") == std::string::npos);  // no GPU named

  // a run on another GPU than the profile's: said in one line on stderr, the result as before
  std::string script = ulysses::test::slurp(dir / "python");
  script.replace(script.find("'device': 'stand-in'"), 20, "'device': 'NVIDIA H100 80GB HBM3'");
  { std::ofstream(dir / "python") << script; }
  const int rc_h100 = std::system((env + "'" + ULYSSES_BIN + "' compare --backend deepspeed " + kFlags +
                                   " --layers 2 >/dev/null 2>'" + (dir / "err") + "'").c_str());
  CHECK(WEXITSTATUS(rc_h100) == 0);
  CHECK(ulysses::test::slurp(dir / "err").find("note: measured on NVIDIA H100 80GB HBM3, predicted for profile h200-sxm-141gb") !=
        std::string::npos);

  // a non-finite loss (the worker writes null: strict JSON) fails the run with exit 1
  script.replace(script.find("'losses': [11.9, 11.8]"), 22, "'losses': [11.9, None]");
  { std::ofstream(dir / "python") << script; }
  const int rc2 = std::system((env + "'" + ULYSSES_BIN + "' run --backend deepspeed " + kFlags + " --layers 2 >/dev/null 2>&1").c_str());
  CHECK(WEXITSTATUS(rc2) == 1);
}

TEST_CASE("outputs: written whole or not at all", "[deepspeed]") {
  ulysses::test::TempDir dir;
  const std::string f = dir / "out.json";
  reports::write_file_atomic(f, "{\"a\": 1}\n");
  CHECK(ulysses::test::slurp(f) == "{\"a\": 1}\n");
  // a folder that does not exist: an error, and nothing is created
  CHECK_THROWS_WITH(reports::write_file_atomic(dir / "no/such/dir/x.json", "x"), Catch::Contains("cannot write"));
  CHECK_FALSE(std::filesystem::exists(dir / "no"));
  // the previous content stays until the new one is complete
  std::filesystem::create_directory(dir / "d");
  CHECK_THROWS(reports::write_file_atomic(dir / "d", "y"));  // a folder cannot be replaced by a file
  CHECK(std::filesystem::is_directory(dir / "d"));
  std::size_t leftovers = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path)) leftovers += e.path().string().find(".tmp") != std::string::npos;
  CHECK(leftovers == 0);
}
