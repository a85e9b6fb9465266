// ulysses plan --all-features (searched, with reasons), --features, --explain and --target-seq-len
// through the built binary.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tests/cli/run_cli.hpp"

using nlohmann::json;
using ulysses::test::count_lines;
using ulysses::test::run_cli;

namespace {

json run_json(const std::string& flags, int rc = 0) {
  const auto r = run_cli("plan " + flags + " --format json");
  INFO(flags << "\n" << r.err);
  REQUIRE(r.rc == rc);
  return json::parse(r.out);
}

}  // namespace

TEST_CASE("plan --all-features: at least every ladder rung, names its choice and why", "[cli][rungs]") {
  for (const char* setup : {"--model llama-3.1-70b --profile h100-sxm-80gb --gpus 2",
                            "--model llama-3.1-70b --profile h200-sxm-141gb --gpus 16"}) {
    INFO(setup);
    const json all = run_json(std::string(setup) + " --all-features");
    const auto S = all["seq_len"].get<std::int64_t>();
    for (const char* rung : {"--sp-size 1", "--features tiled_logits", "--features tiled_logits,ulysses",
                             "--features tiled_logits,ulysses,tiled_mlp",
                             "--features tiled_logits,ulysses,tiled_mlp,ckpt_offload",
                             "--features tiled_logits,ulysses,tiled_mlp,ckpt_offload,optimizer_offload,param_offload"})
      CHECK(S >= run_json(std::string(setup) + " " + rung)["seq_len"].get<std::int64_t>());
    const auto& f = all["all_features"];
    CHECK(f["searched"].size() == 6);
    CHECK(f["why"].size() == 6);
    CHECK(f["sets_tried"] == 64);
    // the chosen set is what the scenario has on
    const std::string chosen = f["chosen"];
    CHECK((chosen.find("optimizer_offload") != std::string::npos) == all["scenario"]["plan"]["offload_optimizer"].get<bool>());
    CHECK((chosen.find("param_offload") != std::string::npos) == all["scenario"]["plan"]["offload_params"].get<bool>());
  }
  // a given dp_shard_size: the sets without ulysses are not valid plans there, the others are searched
  const json shard = run_json("--model llama-3.1-70b --gpus 24 --dp-shard-size 3 --all-features");
  CHECK(shard["scenario"]["plan"]["sp_size"] == 8);
  CHECK(shard["seq_len"].get<std::int64_t>() > 0);
  const auto table = run_cli("plan --model llama-3.1-70b --profile h200-sxm-141gb --gpus 16 --all-features");
  REQUIRE(table.rc == 0);
  CHECK(table.out.find("--all-features chose: ") == 0);
  CHECK(table.out.find("optimizer_offload left out") != std::string::npos);  // host RAM binds with it (issue 16)
  CHECK(table.out.find("host RAM binds") != std::string::npos);
}

TEST_CASE("plan --explain: what binds and what each rung and x2 GPUs would give", "[cli][rungs]") {
  const json j = run_json("--model llama-3.1-8b --profile h100-sxm-80gb --gpus 8 --sp-size 8 --tiled-logits --explain");
  const auto& e = j["explain"];
  CHECK(e["binding"] == j["binding"]);
  CHECK(e["largest_terms"].size() == 3);
  REQUIRE(e["changes"].size() == 7);
  CHECK(e["changes"][6]["change"] == "gpus_x2");
  // + tiled_mlp: the same as planning with it
  const json with_mlp = run_json("--model llama-3.1-8b --profile h100-sxm-80gb --gpus 8 --sp-size 8 --tiled-logits --tiled-mlp");
  CHECK(e["changes"][2]["change"] == "tiled_mlp");
  CHECK(e["changes"][2]["seq_len"] == with_mlp["seq_len"]);
  const auto table = run_cli("plan --model llama-3.1-8b --gpus 8 --explain");
  REQUIRE(table.rc == 0);
  CHECK(table.out.find("explain: GPU HBM binds") != std::string::npos);
  CHECK(table.out.find("more GPUs: x2") != std::string::npos);
}

TEST_CASE("plan --target-seq-len: fewest GPUs, options fastest first, exit 3 when unreachable", "[cli][rungs]") {
  for (const char* target : {"1M", "4M"}) {
    INFO(target);
    const json j = run_json(std::string("--model llama-3.1-8b --profile h100-sxm-80gb --target-seq-len ") + target);
    CHECK(j["reached"] == true);
    const auto gpus = j["gpus"].get<std::int64_t>();
    CHECK(j["scenario"]["gpus"] == gpus);
    REQUIRE(j["options"].size() > 0);
    for (const auto& o : j["options"]) CHECK(o["seq_len"].get<std::int64_t>() >= j["target_seq_len"].get<std::int64_t>());
    // predict agrees: the answer fits at the target
    const auto& p = j["scenario"]["plan"];
    std::string flags = "--model llama-3.1-8b --profile h100-sxm-80gb --gpus " + std::to_string(gpus) + " --sp-size " +
                        std::to_string(p["sp_size"].get<int>()) + " --seq-len " + std::to_string(j["eval_seq_len"].get<std::int64_t>());
    for (const auto& [key, flag] : {std::pair{"tiled_logits", "tiled-logits"}, {"tiled_mlp", "tiled-mlp"},
                                    {"offload_checkpoints", "offload-checkpoints"}, {"offload_optimizer", "offload-optimizer"},
                                    {"offload_params", "offload-params"}})
      flags += std::string(" --") + flag + "=" + (p[key].get<bool>() ? "true" : "false");
    const auto pr = run_cli("predict " + flags + " --format json");
    REQUIRE(pr.rc == 0);
    const json q = json::parse(pr.out);
    CHECK(q["binding"] == "none");
    // the scan's previous count does not reach it
    const auto& scanned = j["scanned"];
    if (scanned.size() > 1) CHECK(scanned[scanned.size() - 2]["seq_len"].get<std::int64_t>() < j["target_seq_len"].get<std::int64_t>());
  }
  const auto far = run_cli("plan --model llama-3.1-8b --target-seq-len 2G --format json");
  CHECK(far.rc == 3);
  CHECK(json::parse(far.out)["reached"] == false);
  const auto table = run_cli("plan --model llama-3.1-8b --target-seq-len 2G");
  CHECK(table.rc == 3);
  CHECK(table.out.find("NOT REACHED") != std::string::npos);
  CHECK(run_cli("plan --help").out.find("exit 3") != std::string::npos);
}

TEST_CASE("plan --target-seq-len / --features: bad input is one line, exit 2", "[cli][rungs]") {
  for (const char* args : {"--target-seq-len 0", "--target-seq-len abc", "--target-seq-len 1.5",
                           "--target-seq-len -1M", "--target-seq-len 1M --seq-len 4096",
                           "--target-seq-len 1M --explain", "--features foo", "--features ulysses,ulysses",
                           "--target-seq-len 1M --sp-size 8", "--target-seq-len 1M --granularity 0"}) {
    INFO(args);
    const auto r = run_cli(std::string("plan --model llama-3.1-8b ") + args);
    CHECK(r.rc == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.out.empty());
  }
}
