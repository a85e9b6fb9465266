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
