// `--scope block|step` (whole steps on our runtime, issue 13): bad or unsupported combinations are one
// line naming --scope and exit 2, whatever backends this build has.
#include <catch2/catch.hpp>

#include <string>

#include "tests/cli/run_cli.hpp"

using ulysses::test::CliResult;
using ulysses::test::run_cli;
using ulysses::test::source_path;

namespace {
const std::string kTiny = " --scenario " + source_path("scenarios/cpu-tiny.yaml");
const std::string kLlama = " --model llama-3.1-8b --profile h200-sxm-141gb --gpus 1 --sp-size 1 --seq-len 16384";

void one_line_exit2(const std::string& args, const std::string& must_name) {
  const CliResult r = run_cli(args);
  INFO(args << "\n" << r.err);
  CHECK(r.rc == 2);
  CHECK(ulysses::test::count_lines(r.err) == 1);
  CHECK(r.err.find(must_name) != std::string::npos);
}
}  // namespace

TEST_CASE("step scope: bad --scope values and backends without whole steps are refused in one line", "[cli][step_scope]") {
  one_line_exit2("run --backend cpu --scope sideways" + kTiny, "--scope");
  one_line_exit2("run --backend cpu --scope step" + kTiny, "--scope");  // the cpu backend runs the block only
  one_line_exit2("compare --backend cpu --scope step" + kTiny, "--scope");
  one_line_exit2("run --backend deepspeed --scope block" + kLlama, "--scope");
  one_line_exit2("run --backend cpu --layers 2" + kTiny, "--layers");  // a block run takes no --layers
#ifndef ULYSSES_WITH_CUDA
  one_line_exit2("compare --backend cuda --scope step" + kLlama, "--backend");  // this build has no CUDA backend
#endif
}
