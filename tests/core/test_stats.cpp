// core/stats.hpp: the one median.
#include <catch2/catch.hpp>

#include <vector>

#include "core/stats.hpp"

using namespace ulysses;

TEST_CASE("core: median of odd, even, unsorted and empty samples", "[core][stats]") {
  CHECK(core::median({}) == 0);
  CHECK(core::median({7}) == 7);
  CHECK(core::median({3, 1, 2}) == 2);
  CHECK(core::median({4, 1, 3, 2}) == 2.5);  // mean of the two middle values
  CHECK(core::median({5, 5, 1, 9, 9}) == 5);
  const std::vector<double> v = {2, 1};
  CHECK(core::median(v) == 1.5);
  CHECK(v == std::vector<double>{2, 1});  // taken by value: the caller's order stays
}
