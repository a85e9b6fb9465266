// set_provenance: one clause per kind, replaced by a later measurement of that kind, older text kept.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>

#include "sim/provenance.hpp"

using ulysses::drop_provenance;
using ulysses::set_provenance;

TEST_CASE("provenance: a kind's clause is replaced, others and untagged text stay", "[sim][provenance]") {
  std::string p;
  set_provenance(p, "cuda", "measured 1 by `calibrate`; attention: keys a; b");
  CHECK(p == "[cuda] measured 1 by `calibrate`; attention: keys a; b");
  set_provenance(p, "pytorch_context", "2 GB: measured 2");
  set_provenance(p, "op_bench", "op bench measured 2");
  CHECK(p == "[cuda] measured 1 by `calibrate`; attention: keys a; b; [pytorch_context] 2 GB: measured 2; [op_bench] op bench measured 2");
  // a second calibrate of the same kind: its clause replaced in place, once
  set_provenance(p, "pytorch_context", "1.9 GB: measured 3");
  CHECK(p == "[cuda] measured 1 by `calibrate`; attention: keys a; b; [pytorch_context] 1.9 GB: measured 3; [op_bench] op bench measured 2");
  // the last clause too, and a clause of the first kind (its "; "-joined parts go with it)
  set_provenance(p, "op_bench", "op bench measured 4");
  set_provenance(p, "cuda", "measured 5");
  CHECK(p == "[cuda] measured 5; [pytorch_context] 1.9 GB: measured 3; [op_bench] op bench measured 4");
  // a kind that is a prefix of another's is not mistaken for it; a tag inside a clause's text is not a clause
  set_provenance(p, "pytorch", "x [op_bench] y");
  set_provenance(p, "op", "z");
  CHECK(p == "[cuda] measured 5; [pytorch_context] 1.9 GB: measured 3; [op_bench] op bench measured 4; [pytorch] x [op_bench] y; [op] z");
  // a profile written before the tags: its text stays in front
  std::string old = "measured 2026-11-30 by `calibrate --backend cuda`; a2a_idle_penalty_us measured then";
  set_provenance(old, "attention", "ulysses_flash curves measured today");
  set_provenance(old, "attention", "again");
  CHECK(old == "measured 2026-11-30 by `calibrate --backend cuda`; a2a_idle_penalty_us measured then; [attention] again");
  CHECK_THROWS_AS(set_provenance(old, "Bad Kind", "x"), std::invalid_argument);
  CHECK_THROWS_AS(set_provenance(old, "", "x"), std::invalid_argument);
}

TEST_CASE("provenance: a text that looks like a boundary, and a clause dropped", "[sim][provenance]") {
  std::string p;
  set_provenance(p, "cuda", "m1; [op_bench] fake");  // would otherwise read as an op_bench clause
  set_provenance(p, "op_bench", "real");
  CHECK(p == "[cuda] m1, [op_bench] fake; [op_bench] real");
  set_provenance(p, "zero3_fused_adam", "z");
  set_provenance(p, "ulysses_kernels", "k");
  drop_provenance(p, "zero3_fused_adam");  // a middle clause
  CHECK(p == "[cuda] m1, [op_bench] fake; [op_bench] real; [ulysses_kernels] k");
  drop_provenance(p, "ulysses_kernels");  // the last
  CHECK(p == "[cuda] m1, [op_bench] fake; [op_bench] real");
  drop_provenance(p, "cuda");  // the first
  CHECK(p == "[op_bench] real");
  drop_provenance(p, "absent");
  CHECK(p == "[op_bench] real");
  drop_provenance(p, "op_bench");
  CHECK(p.empty());
}
