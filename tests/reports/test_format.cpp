// reports/format: one convention for token counts and times in tables; version and fingerprints.
#include <catch2/catch.hpp>

#include <yaml-cpp/yaml.h>

#include "reports/format.hpp"
#include "reports/json_out.hpp"
#include "reports/table.hpp"
#include "reports/version.hpp"
#include "sim/config.hpp"
#include "core/errors.hpp"
#include "sim/tokens.hpp"

using namespace ulysses;
using namespace ulysses::reports;

TEST_CASE("human_tokens: decimal K/M/G as papers write them", "[reports][format]") {
  CHECK(human_tokens(0) == "0");
  CHECK(human_tokens(999) == "999");
  CHECK(human_tokens(1000) == "1K");
  CHECK(human_tokens(64000) == "64K");
  CHECK(human_tokens(65536) == "65.5K");
  CHECK(human_tokens(131072) == "131.1K");
  CHECK(human_tokens(464900) == "464.9K");
  CHECK(human_tokens(999949) == "999.9K");
  CHECK(human_tokens(999960) == "1M");  // rounds to 1000.0K: the next unit instead
  CHECK(human_tokens(1000000) == "1M");
  CHECK(human_tokens(1048576) == "1.05M");
  CHECK(human_tokens(4526000) == "4.53M");
  CHECK(human_tokens(4600000) == "4.6M");
  CHECK(human_tokens(2000000000) == "2G");
  CHECK(human_tokens(std::int64_t{1} << 40) == "1099.51G");
  // what is printed without rounding reads back as the same count
  for (std::int64_t n : {1000, 64000, 1500000, 4600000, 2000000000})
    CHECK(parse_tokens(human_tokens(n), "", "x") == n);
}

TEST_CASE("human_time: us, ms, s, then h:mm:ss", "[reports][format]") {
  CHECK(human_time(0) == "0.0 us");
  CHECK(human_time(12.34e-6) == "12.3 us");
  CHECK(human_time(4.561e-3) == "4.56 ms");
  CHECK(human_time(12.345) == "12.35 s");  // 12.345 is 12.3449999... in binary
  CHECK(human_time(65) == "0:01:05");
  CHECK(human_time(9781) == "2:43:01");
  CHECK(human_time(100 * 3600.0) == "100:00:00");
  CHECK(human_time(0.99996e-3) == "1.00 ms");  // never "1000.0 us"
  CHECK(human_time(0.99999) == "999.99 ms");
  CHECK(human_time(0.999996) == "1.00 s");  // never "1000.00 ms"
  CHECK(human_time(59.999) == "0:01:00");
  CHECK(human_time(-1) == "-1 s");
  CHECK(human_time(1e20) == "1e+20 s");
}

TEST_CASE("fnv1a64_hex: the 64-bit FNV-1a test vectors", "[reports][format]") {
  CHECK(fnv1a64_hex("") == "cbf29ce484222325");
  CHECK(fnv1a64_hex("a") == "af63dc4c8601ec8c");
  CHECK(fnv1a64_hex("foobar") == "85944171f73967e8");
}

TEST_CASE("version: tool version, git revision and schema in every result JSON", "[reports][format]") {
  const auto v = version_json();
  CHECK(v["tool"] == tool_version());
  CHECK(!tool_version().empty());
  CHECK(!git_revision().empty());
  CHECK(v["schema"] == kJsonSchemaVersion);
  CHECK(version_line().find(tool_version()) != std::string::npos);
}

namespace {
// The dotted key in j ("plan.sp_size" -> j["plan"]["sp_size"]), or nullptr.
const Json* at_path(const Json& j, const std::string& key) {
  const Json* cur = &j;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = key.find('.', start);
    const std::string part = key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!cur->is_object() || !cur->contains(part)) return nullptr;
    cur = &(*cur)[part];
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}
}  // namespace

TEST_CASE("scenario echo: every settable key appears, with the value that was set", "[reports][format]") {
  Scenario sc = load_scenario(std::string(ULYSSES_SOURCE_DIR) + "/scenarios/llama8b-h100-sp8.yaml");
  const Json j = scenario_json(sc);
  for (const auto& key : settable_keys()) {
    INFO(key);
    CHECK(at_path(j, key) != nullptr);
  }
  // keys that change the answer, set to non-defaults, come back with those values
  set_key(sc, "plan.rmsnorm_implementation", "fused", "--rmsnorm-implementation");
  set_key(sc, "plan.reduce_bucket_size", "123456789", "t");
  set_key(sc, "model.qk_norm", "true", "t");
  set_key(sc, "model.qkv_bias", "true", "t");
  set_key(sc, "plan.torch_adam", "true", "t");
  set_key(sc, "plan.expandable_segments", "false", "t");
  set_key(sc, "plan.runtime", "ulysses", "t");
  set_key(sc, "profile.gemm_eff", "0.5", "t");
  const Json k = scenario_json(sc);
  CHECK(k["plan"]["rmsnorm_implementation"] == "fused");
  CHECK(k["plan"]["reduce_bucket_size"] == 123456789);
  CHECK(k["model"]["qk_norm"] == true);
  CHECK(k["model"]["qkv_bias"] == true);
  CHECK(k["plan"]["torch_adam"] == true);
  CHECK(k["plan"]["expandable_segments"] == false);
  CHECK(k["plan"]["runtime"] == "ulysses");
  CHECK(k["profile"]["gemm_eff"] == 0.5);
  CHECK(k["profile"]["name"] == sc.hw.name);
  CHECK(k["profile"]["hbm_bytes"] == sc.hw.hbm_bytes);
  CHECK(k["plan"]["seq_len"] == sc.plan.seq_len);
  CHECK(k["plan"]["dp_shard_size"] == sc.plan.dp_shard_size);
  CHECK(k["gpus"] == sc.gpus);
}

TEST_CASE("scenario echo: a calibrated profile is echoed with a fingerprint of its curves", "[reports][format]") {
  Scenario sc = load_scenario(std::string(ULYSSES_SOURCE_DIR) + "/scenarios/llama70b-h200-sp32.yaml");
  REQUIRE(sc.hw.has_calibration);
  const Json j = scenario_json(sc);
  CHECK(j["profile"]["calibrated"] == true);
  const std::string fp = j["profile"]["calibration_fnv1a64"];
  CHECK(fp.size() == 16);
  sc.hw.calibrated.a2a_alpha_per_tensor_s *= 2;  // another curve value: another fingerprint
  CHECK(scenario_json(sc)["profile"]["calibration_fnv1a64"] != fp);
}

TEST_CASE("step time over a minute is written h:mm:ss with the seconds beside it", "[reports][format]") {
  Prediction p;
  p.step_time_s = 9781;
  const std::string t = throughput_lines(p);
  CHECK(t.find("step time: 2:43:01 (9781 s)") != std::string::npos);
  p.step_time_s = 0.5;
  CHECK(throughput_lines(p).find("step time: 500.00 ms") != std::string::npos);
}
