// The memory family table (sim/memory_families.hpp) covers every term predict() writes, and
// names no term that predict() never writes.
#include <catch2/catch.hpp>
#include <set>
#include <string>

#include "sim/memory_families.hpp"
#include "sim/predict.hpp"
#include "tests/sim/fixtures.hpp"

using namespace ulysses;

TEST_CASE("memory families: every GPU and host term has exactly one family", "[sim][memory][families]") {
  std::set<std::string> written;
  // predict() adds every term (zero or not); two plans so that a plan-dependent term list shows up
  for (bool offload : {false, true}) {
    Scenario sc = test::make_scenario(test::llama31_8b(), test::h100_sxm(), 8, 8, 131072);
    sc.plan.offload_optimizer = offload;
    sc.plan.offload_checkpoints = offload;
    const Prediction p = predict(sc);
    REQUIRE(p.gpu.n > 10);
    REQUIRE(p.host.n > 3);
    for (const MemoryBreakdown* m : {&p.gpu, &p.host})
      for (int i = 0; i < m->n; ++i) {
        INFO(m->terms[i].name);
        CHECK(memory_family_name(m->terms[i].name) != nullptr);
        written.insert(m->terms[i].name);
      }
  }
  std::set<std::string> named;
  for (const auto& tf : kMemoryTermFamilies) {
    INFO(tf.term);
    CHECK(named.insert(tf.term).second);  // no term twice
    CHECK(written.count(tf.term) == 1);   // no stale name
  }
  CHECK(memory_family_name("no_such_term") == nullptr);
  CHECK(std::string(memory_family_name("fragmentation")) == "fixed/allocator");
}
