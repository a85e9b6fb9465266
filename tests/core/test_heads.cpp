// core/heads.hpp: the Ulysses head rules, accepted and rejected (H, H_kv, P), and the runtime's wording of them.
#include <catch2/catch.hpp>

#include "core/heads.hpp"
#include "runtime/backend.hpp"

using namespace ulysses;
using core::HeadRule;

TEST_CASE("core: head rules accept split and replicated kv heads", "[core][heads]") {
  CHECK(core::head_rule(32, 8, 1) == HeadRule::ok);
  CHECK(core::head_rule(32, 8, 4) == HeadRule::ok);    // kv heads split: 2 per rank
  CHECK(core::head_rule(32, 8, 8) == HeadRule::ok);    // one kv head per rank
  CHECK(core::head_rule(32, 8, 16) == HeadRule::ok);   // replicated: 16 % 8 == 0
  CHECK(core::head_rule(32, 32, 32) == HeadRule::ok);  // MHA
  CHECK(core::kv_heads_divide(32, 8));
}

TEST_CASE("core: head rules reject, first broken rule first", "[core][heads]") {
  CHECK_FALSE(core::kv_heads_divide(32, 6));
  CHECK(core::head_rule(32, 6, 2) == HeadRule::kv_heads_divide_heads);
  CHECK(core::head_rule(32, 6, 3) == HeadRule::kv_heads_divide_heads);  // also breaks H % P: reported first
  CHECK(core::head_rule(32, 8, 3) == HeadRule::heads_divisible_by_sp);
  CHECK(core::head_rule(32, 8, 64) == HeadRule::heads_divisible_by_sp);
  CHECK(core::head_rule(48, 12, 8) == HeadRule::kv_heads_split_or_replicated);  // 12 % 8 and 8 % 12
  CHECK(core::sp_head_rule(32, 6, 2) == HeadRule::ok);                         // the sp rules alone
  CHECK(core::sp_head_rule(48, 12, 8) == HeadRule::kv_heads_split_or_replicated);
}

TEST_CASE("core: the runtime words each head rule as before", "[core][heads][runtime]") {
  runtime::BlockShape s;
  s.B = 1, s.S = 4096, s.H = 32, s.H_kv = 8, s.D = 128, s.P = 8;
  CHECK(runtime::validate(s).empty());
  s.H_kv = 6;
  CHECK(runtime::validate(s) == "heads (32) must be a multiple of kv_heads (6)");
  s.H_kv = 8, s.P = 3;
  CHECK(runtime::validate(s) == "heads (32) must be divisible by sp_size (3)");
  s.H = 48, s.H_kv = 12, s.P = 8;
  CHECK(runtime::validate(s) == "kv_heads (12) must divide or be divisible by sp_size (8)");
}
