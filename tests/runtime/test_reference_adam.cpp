// The fp64 optimizer step (runtime/reference_adam.hpp) against properties that do not restate its
// formula: under a constant gradient g, Adam's bias-corrected moments are g and g^2 at every step, so
// each step moves a parameter by exactly lr g / (|g| + eps); decoupled weight decay shrinks a parameter
// with a zero gradient by the factor (1 - lr wd) per step; clipping scales the gradients to the norm
// max_norm (up to DeepSpeed's 1e-6) and leaves smaller ones alone.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "runtime/reference_adam.hpp"

using namespace ulysses::runtime;

TEST_CASE("AdamW under a constant gradient moves each parameter by lr g / (|g| + eps) per step", "[runtime][adam]") {
  AdamConfig c;
  c.lr = 1e-3;
  const std::vector<double> p0 = {0.5, -0.25, 1.0, 0.0}, g = {0.3, -2e-3, 1e-7, -5.0};
  AdamState s = adam_state_from(p0);
  for (std::int64_t t = 1; t <= 5; ++t) {
    adamw_reference(s, g, 1.0, t, c);
    for (std::size_t i = 0; i < p0.size(); ++i) {
      const double want = p0[i] - double(t) * c.lr * g[i] / (std::abs(g[i]) + c.eps);
      INFO("step " << t << " element " << i);
      CHECK(s.master[i] == Approx(want).margin(1e-12));
    }
  }
  // the moments are the raw (not bias-corrected) running averages
  CHECK(s.m[0] == Approx((1 - std::pow(0.9, 5)) * 0.3).epsilon(1e-12));
  CHECK(s.v[3] == Approx((1 - std::pow(0.999, 5)) * 25.0).epsilon(1e-12));
}

TEST_CASE("AdamW's decoupled weight decay shrinks a parameter with no gradient by (1 - lr wd) per step", "[runtime][adam]") {
  AdamConfig c;
  c.lr = 1e-2, c.weight_decay = 0.1;
  AdamState s = adam_state_from({2.0});
  for (std::int64_t t = 1; t <= 3; ++t) adamw_reference(s, {0.0}, 1.0, t, c);
  CHECK(s.master[0] == Approx(2.0 * std::pow(1 - 1e-3, 3)).epsilon(1e-12));
  CHECK_THROWS(adamw_reference(s, {0.0}, 1.0, 0, c));        // steps count from 1
  CHECK_THROWS(adamw_reference(s, {0.0, 1.0}, 1.0, 4, c));   // sizes must agree
}

TEST_CASE("clipping scales the global gradient norm down to max_norm and leaves a smaller norm alone", "[runtime][adam]") {
  const std::vector<double> a = {3.0, 0.0}, b = {4.0};  // global norm 5 over two tensors
  const ClipResult r = clip_gradients({&a, &b}, 1.0);
  CHECK(r.norm == Approx(5.0).epsilon(1e-15));
  CHECK(r.coef * r.norm == Approx(1.0).epsilon(1e-6));
  CHECK(r.coef < 0.2);  // DeepSpeed's + 1e-6 makes it a little smaller than 1 / 5
  CHECK(clip_gradients({&a, &b}, 10.0).coef == 1.0);
  CHECK(clip_gradients({&a, &b}, 0.0).coef == 1.0);  // clipping off
}
