// Hostile JSON inputs (issue 17): stored records of `validate --stored` / `capacity --stored` and
// raw files of `calibrate --from-raw` that lack a key, hold a wrong type, nest very deeply or hold
// values that used to hang, crash or print a wrong number. Each must end in ONE line naming the
// file and the key, exit 2, within seconds (commands run under `timeout`: a hang fails the test).
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli/run_cli.hpp"

using nlohmann::json;
using ulysses::test::slurp;
using ulysses::test::source_path;
using ulysses::test::TempDir;

namespace {

struct Result {
  int rc = -1;
  std::string err;
};

// The binary under `timeout 60` (exit 124 when it hangs), stdout dropped.
Result run_limited(const std::string& args) {
  TempDir tmp;
  const std::string err = tmp / "stderr";
  const std::string cmd = "timeout 60 '" + std::string(ULYSSES_BIN) + "' " + args + " >/dev/null 2>'" + err + "'";
  const int status = std::system(cmd.c_str());
  Result r;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = slurp(err);
  return r;
}

json seed(const std::string& name) { return json::parse(slurp(source_path("tests/fuzz/corpus/" + name))); }

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// exit 2, one line, naming the file and every fragment of `key`, no raw library message
void check_one_line(const Result& r, const std::string& file, const std::string& key) {
  INFO(r.err);
  CHECK(r.rc == 2);
  CHECK(ulysses::test::count_lines(r.err) == 1);
  CHECK(r.err.find(file) != std::string::npos);
  CHECK(r.err.find(key) != std::string::npos);
  CHECK(r.err.find("json.exception") == std::string::npos);
}

}  // namespace

TEST_CASE("hostile stored records: wrong types and missing keys are one line, exit 2", "[cli][hostile]") {
  TempDir dir;
  // top-level text keys holding a number (was: raw type_error, exit 1)
  json r = seed("record/block-capacity.json");
  r["model"] = 5;
  write(dir / "model5.json", r.dump());
  check_one_line(run_limited("validate --stored '" + (dir / "model5.json") + "'"), "model5.json", "model: must be text");
  check_one_line(run_limited("capacity --stored '" + (dir / "model5.json") + "'"), "model5.json", "model: must be text");
  // a step measurement's field of the wrong type (was: the raw nlohmann message inside the line)
  json s = seed("record/step-validation.json");
  s["cases"][0]["measured"]["max_memory_allocated"] = "x";
  write(dir / "stepx.json", s.dump());
  check_one_line(run_limited("validate --stored '" + (dir / "stepx.json") + "'"), "stepx.json",
                 "cases[0].measured.max_memory_allocated: must be an integer");
  // ranks far out of int range (was: exit 1 from a failed conversion)
  s = seed("record/step-validation.json");
  s["cases"][0]["measured"]["ranks"] = 1e30;
  write(dir / "ranks.json", s.dump());
  check_one_line(run_limited("validate --stored '" + (dir / "ranks.json") + "'"), "ranks.json", "cases[0].measured.ranks");
  // a missing phase time names the phase
  s = seed("record/step-validation.json");
  s["cases"][0]["measured"]["phases"][2].erase("median_s");
  write(dir / "nomedian.json", s.dump());
  check_one_line(run_limited("validate --stored '" + (dir / "nomedian.json") + "'"), "nomedian.json",
                 "cases[0].measured.phases[2].median_s: missing required key");
  // a phase's SM clock of 0 MHz, or one without its sample count
  s = seed("record/step-validation.json");
  s["cases"][0]["measured"]["phases"][1]["sm_mhz"] = 0;
  s["cases"][0]["measured"]["phases"][1]["sm_samples"] = 3;
  write(dir / "mhz0.json", s.dump());
  check_one_line(run_limited("validate --stored '" + (dir / "mhz0.json") + "'"), "mhz0.json", "cases[0].measured.phases[1].sm_mhz");
  s["cases"][0]["measured"]["phases"][1]["sm_mhz"] = 1545;
  s["cases"][0]["measured"]["phases"][1].erase("sm_samples");
  write(dir / "nosamples.json", s.dump());
  check_one_line(run_limited("validate --stored '" + (dir / "nosamples.json") + "'"), "nosamples.json",
                 "cases[0].measured.phases[1].sm_samples: missing required key");
  s["cases"][0]["measured"]["phases"][1].erase("sm_mhz");
  s["cases"][0]["measured"]["phases"][1]["sm_samples"] = 3;
  write(dir / "nomhz.json", s.dump());
  check_one_line(run_limited("validate --stored '" + (dir / "nomhz.json") + "'"), "nomhz.json",
                 "cases[0].measured.phases[1].sm_mhz: missing required key");
  // a measured time of 0 s (was: an infinite error, exit 1 as a missed target)
  json b = seed("record/block-validation.json");
  b["cases"][0]["phases"][1]["measured_s"] = 0;
  write(dir / "meas0.json", b.dump());
  check_one_line(run_limited("validate --stored '" + (dir / "meas0.json") + "'"), "meas0.json", "cases[0].phases[1].measured_s");
  // keys that are not [key, value] pairs of text
  b = seed("record/block-validation.json");
  b["cases"][1]["keys"][0] = json::array({"plan.sp_size", 2});
  write(dir / "pair.json", b.dump());
  check_one_line(run_limited("validate --stored '" + (dir / "pair.json") + "'"), "pair.json", "cases[1].keys[0][1]: must be text");
}

TEST_CASE("hostile stored records: granularity 0 and deep nesting neither hang nor crash", "[cli][hostile]") {
  TempDir dir;
  // granularity <= 0 (was: capacity --stored looped forever)
  json r = seed("record/block-capacity.json");
  for (const json& g : {json(0), json(-1024), json("1024"), json(1e300)}) {
    r["granularity"] = g;
    write(dir / "g.json", r.dump());
    check_one_line(run_limited("capacity --stored '" + (dir / "g.json") + "'"), "g.json", "granularity: must be an integer");
  }
  // 200000 nested lists in a case's keys (was: a stack overflow, exit 139)
  const std::string text = slurp(source_path("tests/fuzz/corpus/record/block-validation.json"));
  std::string deep = text;
  const auto at = deep.find("\"keys\": [");
  REQUIRE(at != std::string::npos);
  deep.insert(at + 9, std::string(200000, '[') + std::string(200000, ']') + ",");
  write(dir / "deep.json", deep);
  check_one_line(run_limited("validate --stored '" + (dir / "deep.json") + "'"), "deep.json", "nested deeper than 64");
  // an object with 100000 keys (ordered_json inserts each with a linear search)
  std::string wide = "{\"cases\": [{\"name\": \"x\"";
  for (int i = 0; i < 100000; ++i) wide += ",\"k" + std::to_string(i) + "\": 1";
  write(dir / "wide.json", wide + "}]}");
  check_one_line(run_limited("capacity --stored '" + (dir / "wide.json") + "'"), "wide.json", "more than 4096 keys");
}

TEST_CASE("hostile calibration raw files: one line, exit 2, never a wrong curve", "[cli][hostile][calibrate]") {
  TempDir dir;
  const json base = seed("calibration_raw/h200-calibration-small.json");
  auto calibrate = [&](const json& raw, const std::string& name) {
    write(dir / name, raw.dump());
    return run_limited("calibrate --from-raw '" + (dir / name) + "' --profile h200-sxm-141gb");
  };
  // the untouched seed derives (the tests below change one thing each)
  REQUIRE(calibrate(base, "ok.json").rc == 0);
  json c = base;
  c["a2a_transport"] = 5;  // was: raw type_error, exit 1
  check_one_line(calibrate(c, "tr5.json"), "tr5.json", "a2a_transport: must be text");
  c = base;
  c["measured_at"] = json::array();  // was: raw type_error, exit 1
  check_one_line(calibrate(c, "at.json"), "at.json", "measured_at: must be text");
  c = base;
  c["a2a"][0]["P"] = 1e300;  // was: a float-to-int conversion out of range (undefined behaviour)
  check_one_line(calibrate(c, "p300.json"), "p300.json", "a2a[0].P: must be an integer");
  c = base;
  c["a2a"][1]["q_bytes_per_rank"] = c["a2a"][0]["q_bytes_per_rank"];  // was: exit 0 with a curve that cannot load
  check_one_line(calibrate(c, "flat.json"), "flat.json", "a2a[1]: q_bytes_per_rank and qkv_bytes_per_rank must increase strictly");
  c = base;
  c["a2a"][0]["a2a.out.fwd_s"] = 1e-300;  // was: an infinite bandwidth in the curve
  check_one_line(calibrate(c, "tiny.json"), "tiny.json", "a2a[0].a2a.out.fwd_s: phase times must be > 0 seconds");
}
