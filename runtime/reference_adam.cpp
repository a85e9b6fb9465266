// runtime/reference_adam.hpp: the clipping rule and AdamW in fp64, in the order the header states them.
#include "runtime/reference_adam.hpp"

#include <cmath>
#include <stdexcept>

namespace ulysses::runtime {

ClipResult clip_gradients(const std::vector<const std::vector<double>*>& grads, double max_norm) {
  double sq = 0;
  for (const auto* g : grads)
    for (double x : *g) sq += x * x;
  return clip_of_norm(std::sqrt(sq), max_norm);
}

ClipResult clip_of_norm(double norm, double max_norm) {
  ClipResult r;
  r.norm = norm;
  const double clip = max_norm > 0 ? (r.norm + 1e-6) / max_norm : 0;
  r.coef = clip > 1 ? 1 / clip : 1;
  return r;
}

AdamState adam_state_from(const std::vector<double>& params) {
  return {params, std::vector<double>(params.size(), 0.0), std::vector<double>(params.size(), 0.0)};
}

void adamw_reference(AdamState& s, const std::vector<double>& grad, double coef, std::int64_t t, const AdamConfig& c) {
  if (t < 1) throw std::invalid_argument("adamw_reference: steps count from 1");
  if (grad.size() != s.master.size() || s.m.size() != s.master.size() || s.v.size() != s.master.size())
    throw std::invalid_argument("adamw_reference: gradient and state sizes differ");
  const double bc1 = 1 - std::pow(c.beta1, double(t)), bc2 = 1 - std::pow(c.beta2, double(t));
  for (std::size_t i = 0; i < grad.size(); ++i) {
    const double g = grad[i] * coef;
    s.m[i] = c.beta1 * s.m[i] + (1 - c.beta1) * g;
    s.v[i] = c.beta2 * s.v[i] + (1 - c.beta2) * g * g;
    const double update = (s.m[i] / bc1) / (std::sqrt(s.v[i] / bc2) + c.eps) + c.weight_decay * s.master[i];
    s.master[i] -= c.lr * update;
  }
}

}  // namespace ulysses::runtime
