// The worker's op bench result (runtime/deepspeed/op_bench.hpp) read back: values kept, bad rows refused.
#include <catch2/catch.hpp>

#include "runtime/deepspeed/op_bench.hpp"

using ulysses::runtime::deepspeed::op_bench_of;
using Json = nlohmann::ordered_json;

namespace {
Json sample() {
  return Json::parse(R"j({
    "attention": [{"impl": "sdpa", "S": 16384, "H": 32, "H_kv": 8, "D": 128, "causal": true, "fwd_s": 0.004, "bwd_s": 0.011}],
    "gemm": [{"op": "q.fwd", "M": 16384, "N": 4096, "K": 4096, "s": 0.0008}],
    "adamw": {"params": 1048576, "s": 0.0002, "impl": "torch.optim.AdamW (foreach default)"},
    "cpu_adam": {"params": 1048576, "s": 0.003, "threads": 16}})j");
}
}  // namespace

TEST_CASE("op bench rows are read with their values", "[runtime][deepspeed][opbench]") {
  const auto b = op_bench_of(sample());
  REQUIRE(b.attention.size() == 1);
  CHECK(b.attention[0].impl == "sdpa");
  CHECK(b.attention[0].S == 16384);
  CHECK(b.attention[0].H_kv == 8);
  CHECK(b.attention[0].bwd_s == Approx(0.011));
  REQUIRE(b.gemm.size() == 1);
  CHECK(b.gemm[0].op == "q.fwd");
  CHECK(b.gemm[0].K == 4096);
  CHECK(b.adamw_params == 1048576);
  CHECK(b.adamw_s == Approx(0.0002));
  CHECK(b.cpu_adam_threads == 16);
}

TEST_CASE("optimizers are optional in the op bench", "[runtime][deepspeed][opbench]") {
  Json j = sample();
  j.erase("adamw");
  j.erase("cpu_adam");
  const auto b = op_bench_of(j);
  CHECK(b.adamw_s < 0);
  CHECK(b.cpu_adam_s < 0);
}

TEST_CASE("malformed op bench rows name the key", "[runtime][deepspeed][opbench]") {
  auto refused = [](Json j, const std::string& key) {
    try {
      op_bench_of(j);
      FAIL("accepted a malformed op bench (" << key << ")");
    } catch (const std::runtime_error& e) {
      CHECK(std::string(e.what()).find(key) != std::string::npos);
    }
  };
  Json j = sample();
  j["attention"][0]["fwd_s"] = 0;
  refused(j, "ops.attention[0].fwd_s");
  j = sample();
  j["attention"] = Json::array();
  refused(j, "ops.attention");
  j = sample();
  j["gemm"][0].erase("K");
  refused(j, "'K'");
  j = sample();
  j["adamw"]["s"] = -1;
  refused(j, "ops.adamw.s");
  j = sample();
  j["attention"][0]["causal"] = 1;
  refused(j, "causal");
}

TEST_CASE("eager and ZeRO-3 step rows are read, an add's backward may be 0", "[runtime][deepspeed][opbench]") {
  Json j = sample();
  j["eager"] = Json::parse(R"j([{"op": "rmsnorm", "T": 4096, "elems": 16777216, "extra_elems": 0, "fwd_s": 2e-4, "bwd_s": 5e-4},
                                {"op": "add", "T": 65536, "elems": 268435456, "extra_elems": 0, "fwd_s": 4e-4, "bwd_s": 0}])j");
  j["zero_step"] = Json::parse(R"j([{"offload_optimizer": true, "torch_adam": false, "params": 251658240, "step_s": 0.22, "bwd_s": 0.05}])j");
  auto b = op_bench_of(j);
  REQUIRE(b.eager.size() == 2);
  CHECK(b.eager[0].op == "rmsnorm");
  CHECK(b.eager[0].bwd_s == Approx(5e-4));
  CHECK(b.eager[1].bwd_s == 0);
  REQUIRE(b.zero_step.size() == 1);
  CHECK(b.zero_step[0].offload_optimizer);
  CHECK(b.zero_step[0].params == Approx(251658240));
  j["eager"][0]["fwd_s"] = 0;  // a forward always takes time
  CHECK_THROWS_WITH(op_bench_of(j), Catch::Contains("ops.eager[0].fwd_s"));
  j = sample();
  j["zero_step"] = Json::parse(R"j([{"offload_optimizer": "yes", "torch_adam": false, "params": 1, "step_s": 1, "bwd_s": 1}])j");
  CHECK_THROWS_WITH(op_bench_of(j), Catch::Contains("ops.zero_step[0].offload_optimizer"));
}
