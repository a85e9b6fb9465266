// The allocator simulation against PyTorch's allocator itself: every recorded trace under
// records/validation/alloc-traces (eval/scripts/run_alst_gpu.sh alloc-trace, one H200) replayed
// through sim/caching_allocator; the reserved bytes must agree after every allocation and free.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "eval/alloc_replay.hpp"
#include "eval/validation_set.hpp"
#include "sim/caching_allocator.hpp"
#include "sim/memory.hpp"
#include "sim/step_allocs.hpp"
#include "sim/timing.hpp"
#include "tests/cli/run_cli.hpp"

using namespace ulysses;
using ulysses::test::record_path;
using ulysses::test::source_path;

namespace {

// The recorded traces, records/validation/alloc-traces/trace-<case>.txt, in name order.
std::vector<std::filesystem::path> recorded_traces() {
  std::vector<std::filesystem::path> v;
  for (const auto& e : std::filesystem::directory_iterator(record_path("validation/alloc-traces")))
    if (e.path().filename().string().rfind("trace-", 0) == 0) v.push_back(e.path());
  std::sort(v.begin(), v.end());
  return v;
}

// The validation case a trace records (trace-<case>.txt), its scenario built from the set.
Scenario recorded_case(const eval::ValidationSet& set, const std::filesystem::path& p) {
  const std::string file = p.filename().string();
  const std::string name = file.substr(6, file.size() - 10);
  for (const auto& c : set.cases)
    if (c.name == name) return eval::case_scenario(set.model, set.profile, eval::case_keys(set, c), "set", name);
  FAIL("no case " << name << " in the validation set");
  return {};
}

// A recording as the generator's checks read it: the requested bytes of its allocations of
// kStepAllocsMinBytes and more, in order, and the large pool's mapped bytes at each of them (its own
// mapping included: a map line precedes the allocation that caused it). Mappings in whole 20 MiB
// granules are the large pool's; the small pool maps 2 MiB at a time and the generator leaves it out.
struct LargeAllocs {
  std::vector<std::int64_t> bytes, mapped;
};
LargeAllocs large_allocs(const std::filesystem::path& p) {
  LargeAllocs r;
  std::ifstream in(p);
  std::string line;
  std::int64_t large = 0;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    char op = 0;
    std::int64_t x = 0, y = 0;
    ls >> op >> x >> y;
    if ((op == 'm' || op == 'u') && x % kAllocLargeGranule == 0) large += op == 'm' ? x : -x;
    if (op == 'a' && y >= kStepAllocsMinBytes) r.bytes.push_back(y), r.mapped.push_back(large);
  }
  return r;
}

}  // namespace

TEST_CASE("allocator sim replays the recorded traces byte for byte", "[eval][allocator]") {
  int n = 0;
  for (const auto& path : recorded_traces()) {
    const std::string p = path.string();
    ++n;
    const eval::AllocReplay r = eval::replay_alloc_trace(p);
    INFO(p);
    CHECK(r.allocs > 1000);
    CHECK(r.releases == 1);  // DeepSpeed's empty_cache during the engine's construction
    CHECK(r.max_reserved_gap == 0);
    CHECK(r.simulated_peak_reserved == r.measured_peak_reserved);
    CHECK(r.simulated_reserved_end == r.measured_reserved_end);
  }
  CHECK(n >= 8);
}

// How much of the sequence a prediction must know: the small pool (<= 1 MiB) does not matter for the
// peak; blocks of 16-64 MiB do. The table: build/tests/ulysses_tests "[.alloc-sensitivity]" -s
TEST_CASE("allocator sim: the small pool hardly moves the reserved peak", "[eval][allocator]") {
  for (const auto& path : recorded_traces()) {
    const eval::AllocReplay all = eval::replay_alloc_trace(path.string());
    const eval::AllocReplay large = eval::replay_alloc_trace(path.string(), (1 << 20) + 1);
    INFO(path.string());
    CHECK(large.allocs < all.allocs);
    CHECK(std::abs(double(large.simulated_peak_reserved) / double(all.simulated_peak_reserved) - 1) < 1e-3);
  }
}

TEST_CASE("allocator sim: the reserved peak without the allocations below 1, 16, 64 MiB", "[.alloc-sensitivity]") {
  std::printf("# trace                                   peak   >1MiB  >=16MiB >=64MiB\n");
  std::printf("#                                        (GiB)    (%%)     (%%)     (%%)\n");
  for (const auto& path : recorded_traces()) {
    const std::string name = path.filename().string();
    const double all = double(eval::replay_alloc_trace(path.string()).simulated_peak_reserved);
    const auto err = [&](std::int64_t mn) {
      return 100 * (double(eval::replay_alloc_trace(path.string(), mn).simulated_peak_reserved) / all - 1);
    };
    std::printf("  %-38s %6.2f %+6.2f %+7.2f %+7.2f\n", name.c_str(), all / double(1 << 30), err((1 << 20) + 1),
                err(16 << 20), err(64 << 20));
  }
}

TEST_CASE("allocator trace: a malformed line is one input error naming the line", "[eval][allocator]") {
  const auto dir = std::filesystem::temp_directory_path() / ("ulysses-alloc-trace-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto write = [&](const char* name, const char* text) {
    const std::string p = (dir / name).string();
    std::ofstream(p) << text;
    return p;
  };
  const std::string head = "# ulysses allocator trace v1: test\n";
  CHECK_THROWS_WITH(eval::replay_alloc_trace(write("a.txt", "a 0 10 0\n")), Catch::Contains("header"));
  CHECK_THROWS_WITH(eval::replay_alloc_trace(write("b.txt", (head + "a 0 10\n").c_str())),
                    Catch::Contains("line 2") && Catch::Contains("a ID BYTES STREAM"));
  CHECK_THROWS_WITH(eval::replay_alloc_trace(write("c.txt", (head + "a 0 10 0\nf 1\n").c_str())),
                    Catch::Contains("line 3") && Catch::Contains("not allocated"));
  CHECK_THROWS_WITH(eval::replay_alloc_trace(write("d.txt", (head + "x 1\n").c_str())), Catch::Contains("must start with"));
  CHECK_THROWS_AS(eval::replay_alloc_trace((dir / "missing.txt").string()), core::InputError);
  const eval::AllocReplay r = eval::replay_alloc_trace(write("e.txt", (head + "m 20971520 0\na 0 2097152 0 # frames: a comment\nf 0\n").c_str()));
  CHECK(r.simulated_peak_reserved == 20971520);
  CHECK(r.measured_peak_reserved == 20971520);
  CHECK(r.max_reserved_gap == 0);
  std::filesystem::remove_all(dir);
}

// The generated engine construction (sim/step_allocs.hpp) against each recording: the large pool's
// reserved bytes when the first step allocates its embedding output ([B, S, h] bf16).
TEST_CASE("generated ZeRO-3 construction: the recorded reserved bytes at the first step", "[eval][allocator]") {
  const eval::ValidationSet set = eval::load_validation_set(source_path("scenarios/validation/h200-alst.yaml"));
  int n = 0;
  for (const auto& path : recorded_traces()) {
    const Scenario sc = recorded_case(set, path);
    const std::int64_t th = sc.plan.micro_batch_size * sc.plan.seq_len * sc.model.hidden * 2;
    const LargeAllocs rec = large_allocs(path);
    const auto first = std::find(rec.bytes.begin(), rec.bytes.end(), th);
    REQUIRE(first != rec.bytes.end());
    const std::int64_t at_cut = rec.mapped[static_cast<std::size_t>(first - rec.bytes.begin())];
    CachingAllocatorSim a;
    TrainingAllocs gen(sc, a);
    REQUIRE(gen.construction_covered());
    gen.construction();
    INFO(path.filename().string() << ": recorded " << at_cut << " B, generated " << a.reserved() << " B");
    std::printf("%-36s recorded %8.3f GiB generated %8.3f GiB  %+.1f MiB\n", path.filename().string().c_str(),
                double(at_cut) / (1 << 30), double(a.reserved()) / (1 << 30), double(a.reserved() - at_cut) / (1 << 20));
    CHECK(a.reserved() == at_cut);
    ++n;
  }
  CHECK(n >= 8);
}

// The generated run (sim/step_allocs.hpp: construction and three steps, as the recordings ran them: one
// warm-up, the memory step, one timed step) against every recording: each allocation of 16 MiB and more,
// in order and size (all eight agree), and the reserved peak (what still differs is when a tensor that
// another stream used returns to its pool: docs/MODEL.md "Reserved memory").
TEST_CASE("generated allocations: whole runs against the recordings", "[eval][allocator]") {
  const eval::ValidationSet set = eval::load_validation_set(source_path("scenarios/validation/h200-alst.yaml"));
  int exact = 0, n = 0;
  for (const auto& path : recorded_traces()) {
    const Scenario sc = recorded_case(set, path);
    CachingAllocatorSim a;
    std::vector<std::int64_t> log;
    TrainingAllocs gen(sc, a, &log);
    REQUIRE(gen.run(3));
    ++n;
    const LargeAllocs rec = large_allocs(path);
    const auto diff = std::mismatch(log.begin(), log.end(), rec.bytes.begin(), rec.bytes.end());
    const bool equal = diff.first == log.end() && diff.second == rec.bytes.end();
    exact += equal;
    const eval::AllocReplay r = eval::replay_alloc_trace(path.string());
    const double err = 100.0 * (double(a.peak_reserved()) / double(r.measured_peak_reserved) - 1);
    const std::string name = path.filename().string();
    INFO(name << ": " << (diff.first - log.begin()) << " of " << log.size() << " generated allocations equal ("
              << rec.bytes.size() << " recorded); reserved peak " << err << " %");
    std::printf("%-36s %5zu of %5zu allocations equal; reserved peak recorded %7.3f GiB generated %7.3f GiB %+.2f %%\n",
                name.c_str(), static_cast<std::size_t>(diff.first - log.begin()), rec.bytes.size(),
                double(r.measured_peak_reserved) / (1 << 30), double(a.peak_reserved()) / (1 << 30), err);
    CHECK(equal);
    // within 3 % (the offloaded checkpoints' frees complete inside the tiled loss: docs/MODEL.md "Reserved memory")
    CHECK(std::abs(err) <= 3.0);
    CHECK(a.peak_reserved() == generated_reserved_peak(sc, 3));
  }
  CHECK(n >= 8);
  CHECK(exact == n);
}

// The generated whole run (construction and three steps, as the recordings ran: one warm-up, the memory
// step, one timed step) against each recording of a plan it covers: every allocation of 16 MiB and more
// in order, and the reserved peak. The table: build/tests/ulysses_tests "[.alloc-steps]" -s
static std::vector<std::int64_t> recorded_completions(const std::filesystem::path& path);
TEST_CASE("generated allocations: whole steps against the recordings", "[.alloc-steps]") {
  const eval::ValidationSet set = eval::load_validation_set(source_path("scenarios/validation/h200-alst.yaml"));
  for (const auto& path : recorded_traces()) {
    const Scenario sc = recorded_case(set, path);
    std::vector<std::int64_t> done = recorded_completions(path);
    if (const char* only = std::getenv("ALLOC_LAG_ONLY_MIB")) {  // experiment: recorded lag only for this size
      const LargeAllocs rec0 = large_allocs(path);
      for (std::size_t i = 0; i < done.size(); ++i)
        if (std::abs(double(rec0.bytes[i]) / (1 << 20) - std::atof(only)) > 0.1) done[i] = 0;
    }
    for (auto policy : {TrainingAllocs::DeferredFree::next_alloc, TrainingAllocs::DeferredFree::end_of_backward,
                        TrainingAllocs::DeferredFree::given}) {
      CachingAllocatorSim a;
      std::vector<std::int64_t> log;
      TrainingAllocs gen(sc, a, &log, policy);
      gen.set_completions(&done);
      if (!gen.run(3)) break;
      const LargeAllocs rec = large_allocs(path);
      const auto diff = std::mismatch(log.begin(), log.end(), rec.bytes.begin(), rec.bytes.end());
      const std::size_t equal = static_cast<std::size_t>(diff.first - log.begin());
      const eval::AllocReplay r = eval::replay_alloc_trace(path.string());
      std::printf("%-36s %s %5zu of %5zu/%5zu equal", path.filename().string().c_str(),
                  policy == TrainingAllocs::DeferredFree::next_alloc ? "next" : policy == TrainingAllocs::DeferredFree::given ? "rec " : "end ", equal, log.size(), rec.bytes.size());
      if (equal < log.size() && equal < rec.bytes.size()) std::printf(" (#%zu: %lld vs %lld)", equal, (long long)log[equal], (long long)rec.bytes[equal]);
      std::printf("  peak recorded %7.3f GiB generated %7.3f GiB %+6.2f %%\n", double(r.measured_peak_reserved) / (1 << 30),
                  double(a.peak_reserved()) / (1 << 30), 100.0 * (double(a.peak_reserved()) / double(r.measured_peak_reserved) - 1));
    }
  }
}

TEST_CASE("generated allocations: dump", "[.alloc-dump]") {
  const eval::ValidationSet set = eval::load_validation_set(source_path("scenarios/validation/h200-alst.yaml"));
  const char* want = std::getenv("ALLOC_DUMP_CASE");
  for (const auto& path : recorded_traces()) {
    if (!want || path.filename().string().find(want) == std::string::npos) continue;
    const Scenario sc = recorded_case(set, path);
    CachingAllocatorSim a;
    std::vector<std::int64_t> log;
    TrainingAllocs gen(sc, a, &log);
    gen.run(3);
    for (std::size_t i = 0; i < log.size(); ++i) std::printf("%zu:%.1fM ", i, double(log[i]) / (1 << 20));
    std::printf("\nreserved at the end: stream 0 %.3f GiB, stream 1 %.3f GiB; peak %.3f GiB\n",
                double(a.reserved_on(0)) / (1 << 30), double(a.reserved_on(1)) / (1 << 30), double(a.peak_reserved()) / (1 << 30));
  }
}

// Which plans the generated sequence covers (sim/step_allocs.hpp): the others keep the binding reserved
// bytes in validate (-1 here), never a sequence that does not describe them.
TEST_CASE("generated allocations: the plans covered, and the ones refused", "[eval][allocator]") {
  const eval::ValidationSet set = eval::load_validation_set(source_path("scenarios/validation/h200-alst.yaml"));
  const Scenario base = recorded_case(set, record_path("validation/alloc-traces/trace-llama8b-l2-none-s16k.txt"));
  REQUIRE_FALSE(base.plan.offload_optimizer);
  CHECK(generated_reserved_peak(base, 1) > 0);
  const auto refused = [&](auto change) {
    Scenario sc = base;
    change(sc.plan);
    return generated_reserved_peak(sc, 1) == -1;
  };
  CHECK(refused([](Plan& p) { p.expandable_segments = false; }));
  CHECK(refused([](Plan& p) { p.zero_stage = 2; }));
  CHECK(refused([](Plan& p) { p.dp_replicate_size = 2; }));
  CHECK(refused([](Plan& p) { p.sp_size = 2; }));
  CHECK(refused([](Plan& p) { p.offload_params = true; }));
  CHECK(refused([](Plan& p) { p.activation_checkpointing = false; }));
  CHECK(refused([](Plan& p) { p.micro_batch_size = 2; }));
  CHECK(refused([](Plan& p) { p.offload_checkpoints = true, p.tiled_mlp = false; }));
  CHECK(refused([](Plan& p) { p.attn_implementation = "flash_attention_2"; }));
  CHECK(refused([](Plan& p) { p.torch_adam = false; }));  // FusedAdam on the GPU
  CHECK_FALSE(refused([](Plan& p) { p.torch_adam = false, p.offload_optimizer = true; }));  // the host's optimizer
  CHECK(refused([](Plan& p) { p.rmsnorm_implementation = RmsNormImpl::fused; }));
  {
    Scenario sc = base;
    sc.model.qkv_bias = true;
    CHECK(generated_reserved_peak(sc, 1) == -1);
    sc = base;
    sc.hw.gpu = "NVIDIA A100 SXM4 80GB";
    CHECK(generated_reserved_peak(sc, 1) == -1);
  }
  CHECK_FALSE(refused([](Plan& p) { p.offload_checkpoints = true, p.tiled_mlp = true; }));
  CHECK_FALSE(refused([](Plan& p) { p.offload_optimizer = true; }));
}

// Per allocation of kStepAllocsMinBytes and more of a recording (in order), how many such allocations
// were issued before its free completed (-1: never freed).
static std::vector<std::int64_t> recorded_completions(const std::filesystem::path& path) {
  std::map<std::int64_t, std::int64_t> index;  // trace id -> large index
  std::vector<std::int64_t> done;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    char op = 0;
    std::int64_t x = 0, y = 0;
    ls >> op >> x >> y;
    if (op == 'a' && y >= kStepAllocsMinBytes) index[x] = static_cast<std::int64_t>(done.size()), done.push_back(-1);
    if (op == 'f' && index.count(x)) done[static_cast<std::size_t>(index[x])] = static_cast<std::int64_t>(done.size());
  }
  return done;
}

// The generator's deferred frees (record_stream: sim/step_allocs.hpp DeferredFree) are the recording's:
// each completes in the recording, never before the generator requests it (a request placed too late, or
// a tensor the recording frees at once, fails), and in every recording some complete later than the next
// allocation (what the next_alloc release leaves out; docs/MODEL.md "Reserved memory").
TEST_CASE("generated allocations: the deferred frees complete after their request in the recordings", "[eval][allocator]") {
  const eval::ValidationSet set = eval::load_validation_set(source_path("scenarios/validation/h200-alst.yaml"));
  int n = 0;
  for (const auto& path : recorded_traces()) {
    const Scenario sc = recorded_case(set, path);
    CachingAllocatorSim a;
    std::vector<std::pair<CachingAllocatorSim::Id, std::int64_t>> deferred;
    TrainingAllocs gen(sc, a);
    gen.log_deferred(&deferred);
    REQUIRE(gen.run(3));
    ++n;
    const std::vector<std::int64_t> done = recorded_completions(path);
    INFO(path.filename().string());
    CHECK(deferred.size() >= 30);
    int late = 0;
    for (const auto& [id, req] : deferred) {
      REQUIRE(id < static_cast<std::int64_t>(done.size()));
      INFO("allocation " << id << " requested before allocation " << req);
      CHECK(done[static_cast<std::size_t>(id)] >= req);
      late += done[static_cast<std::size_t>(id)] > req;
    }
    CHECK(late > 0);
  }
  CHECK(n >= 8);  // not vacuous: the recordings were read
}

// DeferredFree::given with each recording's own completion times: the generated reserved peak within 1.5 % of
// the recorded one (the deferred frees' timing is what the other policies miss; the table: "[.alloc-steps]" -s),
// and the policy without completion times is a logic error.
TEST_CASE("generated allocations: the recorded release times give the recorded reserved peak", "[eval][allocator]") {
  const eval::ValidationSet set = eval::load_validation_set(source_path("scenarios/validation/h200-alst.yaml"));
  int n = 0;
  for (const auto& path : recorded_traces()) {
    const Scenario sc = recorded_case(set, path);
    const std::vector<std::int64_t> done = recorded_completions(path);
    CachingAllocatorSim a;
    TrainingAllocs gen(sc, a, nullptr, TrainingAllocs::DeferredFree::given);
    gen.set_completions(&done);
    REQUIRE(gen.run(3));
    ++n;
    const eval::AllocReplay r = eval::replay_alloc_trace(path.string());
    const double err = 100.0 * (double(a.peak_reserved()) / double(r.measured_peak_reserved) - 1);
    INFO(path.filename().string() << ": reserved peak recorded " << r.measured_peak_reserved << " B, generated "
                                  << a.peak_reserved() << " B, " << err << " %");
    CHECK(std::abs(err) <= 1.5);
  }
  REQUIRE(n >= 8);
  const Scenario sc = recorded_case(set, recorded_traces().front());  // (TrainingAllocs keeps a reference)
  CachingAllocatorSim a;
  TrainingAllocs gen(sc, a, nullptr, TrainingAllocs::DeferredFree::given);
  CHECK_THROWS_AS(gen.run(3), std::logic_error);
}

// When each deferred free completes in the recording, in allocations of 16 MiB and more after its
// request: ALLOC_DUMP_CASE=<case> build/tests/ulysses_tests "[.alloc-lag]" -s
TEST_CASE("generated allocations: deferred frees against the recording", "[.alloc-lag]") {
  const eval::ValidationSet set = eval::load_validation_set(source_path("scenarios/validation/h200-alst.yaml"));
  const char* want = std::getenv("ALLOC_DUMP_CASE");
  for (const auto& path : recorded_traces()) {
    if (!want || path.filename().string().find(want) == std::string::npos) continue;
    const Scenario sc = recorded_case(set, path);
    CachingAllocatorSim a;
    std::vector<std::int64_t> log;
    std::vector<std::pair<CachingAllocatorSim::Id, std::int64_t>> deferred;
    TrainingAllocs gen(sc, a, &log);
    gen.log_deferred(&deferred);
    gen.run(3);
    const std::vector<std::int64_t> done = recorded_completions(path);
    std::printf("# id  MiB  requested-before  completed-before(recorded)  late\n");
    for (const auto& [id, req] : deferred) {
      const std::int64_t rec = id < static_cast<std::int64_t>(done.size()) ? done[static_cast<std::size_t>(id)] : -2;
      std::printf("%6lld %7.1f %6lld %6lld %+4lld\n", (long long)id, double(log[static_cast<std::size_t>(id)]) / (1 << 20),
                  (long long)req, (long long)rec, (long long)(rec - req));
    }
  }
}

// The offloaded checkpoints freed as the forward ends complete inside the tiled loss once their copy has finished,
// with calibrated.pytorch_host_logits_tile_ms (TrainingAllocs::ckpt_release_tile; docs/MODEL.md "When such a free
// completes"): the later the tile, the later the completion, never before the loss's first tile, at the first
// allocation after the loss when the copy outlasts the tiles, tile 1 without the key, and at the next allocation
// without tiled logits.
TEST_CASE("generated allocations: offloaded checkpoints complete at the tile after their copy", "[eval][allocator]") {
  const eval::ValidationSet set = eval::load_validation_set(source_path("scenarios/validation/h200-alst.yaml"));
  const Scenario base = recorded_case(set, record_path("validation/alloc-traces/trace-qwen3-4b-l2-all-s128k.txt"));
  REQUIRE(base.plan.offload_checkpoints);
  REQUIRE(base.plan.tiled_logits);
  REQUIRE(base.hw.calibrated.pytorch_host_logits_tile_s < 0);  // the recorded profile: not measured
  const Dims d = derive_dims(base);
  const std::int64_t ckpt = d.B * d.S_l * d.h * 2;  // one checkpoint, bf16 [T, h]
  const std::int64_t tiles = static_cast<std::int64_t>(torch_chunk_sizes(d.B * d.S_l, d.logits_shards).size());
  REQUIRE(tiles > 4);
  const double copy_s = double(ckpt) / (host_d2h_busy_GBps(base) * 1e9);
  // per generated run: the allocation index before which each checkpoint free of the second step completed, the
  // index of the loss's x_grad allocation in that step, and the reserved peak
  struct Run { std::vector<std::int64_t> done; std::int64_t x_grad = -1; std::int64_t peak = 0; };
  const auto run = [&](double tile_s) {
    Scenario sc = base;
    sc.hw.calibrated.pytorch_host_logits_tile_s = tile_s;
    CachingAllocatorSim a;
    std::vector<std::int64_t> log;
    std::vector<std::pair<CachingAllocatorSim::Id, std::int64_t>> requested, completed;
    TrainingAllocs gen(sc, a, &log);
    gen.log_deferred(&requested);
    gen.log_completed(&completed);
    REQUIRE(gen.run(2));
    Run r;
    r.peak = a.peak_reserved();
    // the second step's checkpoint frees: the last two requests of ckpt bytes before its loss (x_grad: the ckpt-sized
    // allocation right after the final norm's; found as the last allocation of ckpt bytes before the first logits tile)
    std::vector<CachingAllocatorSim::Id> ids;
    for (const auto& [id, req] : requested)
      if (log[static_cast<std::size_t>(id)] == ckpt) ids.push_back(id);
    REQUIRE(ids.size() >= 2);
    const std::vector<CachingAllocatorSim::Id> last(ids.end() - 2, ids.end());
    for (CachingAllocatorSim::Id id : last)
      for (const auto& [cid, at] : completed)
        if (cid == id) r.done.push_back(at);
    REQUIRE(r.done.size() == 2);
    const std::int64_t logits = std::int64_t{torch_chunk_sizes(d.B * d.S_l, d.logits_shards)[0]} * d.V * 2;
    for (std::int64_t i = *std::max_element(last.begin(), last.end()); i < static_cast<std::int64_t>(log.size()); ++i)
      if (log[static_cast<std::size_t>(i)] == logits) { r.x_grad = i - 1; break; }
    REQUIRE(r.x_grad > 0);
    CHECK(log[static_cast<std::size_t>(r.x_grad)] == ckpt);
    return r;
  };
  const Run k1 = run(copy_s), k2 = run(copy_s / 2), k3 = run(copy_s / 3), after = run(copy_s / double(tiles + 1));
  CHECK(k1.done[0] == k1.done[1]);  // both complete together, behind the same copy
  CHECK(k1.done[0] > k1.x_grad + 1);  // not before the loss's first tile
  CHECK(k2.done[0] > k1.done[0]);
  CHECK(k3.done[0] > k2.done[0]);
  CHECK(k2.done[0] - k1.done[0] == k3.done[0] - k2.done[0]);  // one tile's allocations apart
  CHECK(after.done[0] > k3.done[0] + (tiles - 4) * (k2.done[0] - k1.done[0]));  // after the last tile
  // without the key: the first tile after the sync, as a host slower per tile than the copy
  const Run unmeasured = run(-1);
  CHECK(unmeasured.done == k1.done);
  // without tiled logits (no synchronization at the loss's start): at the next allocation after the request
  Scenario untiled = base;
  untiled.plan.tiled_logits = false;
  CachingAllocatorSim a;
  std::vector<std::pair<CachingAllocatorSim::Id, std::int64_t>> requested, completed;
  TrainingAllocs gen(untiled, a);
  gen.log_deferred(&requested);
  gen.log_completed(&completed);
  REQUIRE(gen.run(2));
  std::map<CachingAllocatorSim::Id, std::int64_t> at;
  for (const auto& [id, when] : completed) at[id] = when;
  int checked = 0;
  for (const auto& [id, req] : requested)
    if (at.count(id)) {
      CHECK(at[id] == req);
      ++checked;
    }
  CHECK(checked > 10);
}

// The reserved peak of each recording with offloaded checkpoints and tiled logits, per tile at which their frees
// complete (the host's issue time per tile that gives it): ALLOC_DUMP_CASE-free table,
// build/tests/ulysses_tests "[.alloc-ckpt-tile]" -s
TEST_CASE("generated allocations: the reserved peak per release tile of the checkpoints", "[.alloc-ckpt-tile]") {
  const eval::ValidationSet set = eval::load_validation_set(source_path("scenarios/validation/h200-alst.yaml"));
  for (const auto& path : recorded_traces()) {
    const Scenario base = recorded_case(set, path);
    if (!base.plan.offload_checkpoints || !base.plan.tiled_logits) continue;
    const Dims d = derive_dims(base);
    const double copy_s = double(d.B * d.S_l * d.h * 2) / (host_d2h_busy_GBps(base) * 1e9);
    const eval::AllocReplay r = eval::replay_alloc_trace(path.string());
    std::printf("%s: last checkpoint copy %.2f ms; reserved peak recorded %.3f GiB\n", path.filename().string().c_str(),
                copy_s * 1e3, double(r.measured_peak_reserved) / (1 << 30));
    for (int k : {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128}) {
      Scenario sc = base;
      sc.hw.calibrated.pytorch_host_logits_tile_s = copy_s / k;  // ceil(copy / tile) = k
      CachingAllocatorSim a;
      TrainingAllocs gen(sc, a);
      REQUIRE(gen.run(3));
      std::printf("  tile %3d (host >= %6.3f ms per tile): generated %.3f GiB %+.2f %%\n", k, copy_s / k * 1e3,
                  double(a.peak_reserved()) / (1 << 30),
                  100.0 * (double(a.peak_reserved()) / double(r.measured_peak_reserved) - 1));
    }
  }
}
