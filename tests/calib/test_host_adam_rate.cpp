// The host optimizer's rate (calib/host_adam_rate.hpp) at a small size: a positive time per parameter that
// scales with the work (four times the parameters take longer), and bad arguments refused.
#include <catch2/catch.hpp>

#include "calib/host_adam_rate.hpp"

using namespace ulysses;

TEST_CASE("host optimizer rate: positive, the size it was asked, more parameters take longer", "[calib][adam]") {
  const calib::HostAdamRate small = calib::host_adam_rate(1, 3, 1 << 18);
  const calib::HostAdamRate large = calib::host_adam_rate(1, 3, 1 << 20);
  CHECK(small.params == (1 << 18));
  CHECK(small.s_per_param > 0);
  CHECK(small.step_s == Approx(small.s_per_param * (1 << 18)));
  CHECK(large.step_s > small.step_s);
  CHECK_THROWS(calib::host_adam_rate(1, 0, 16));
  CHECK_THROWS(calib::host_adam_rate(1, 1, 0));
}
