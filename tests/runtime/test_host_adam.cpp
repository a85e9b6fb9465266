// The optimizer on the host (runtime/host_adam.hpp) against AdamW in fp64 (runtime/reference_adam.hpp), two
// steps with clipping active and weight decay on, bf16 and fp32 gradients: master weights, both moments and
// the bf16 parameters (= the master rounded); the same result on 1 and 3 threads, bit for bit; the tensors split
// over two ranks (ZeRO's partitions, each rank on its own thread) with the norm summed over both: the same step.
#include <catch2/catch.hpp>

#include <barrier>
#include <cmath>
#include <random>
#include <thread>
#include <stdexcept>
#include <vector>

#include "runtime/host_adam.hpp"

using namespace ulysses;
using runtime::AdamConfig;

namespace {

struct Case {
  std::vector<std::vector<core::bf16>> params;
  std::vector<std::vector<core::bf16>> grads_bf16;  // tensor 0 and 2
  std::vector<float> grad_fp32;                     // tensor 1
};

Case make_case() {
  std::mt19937_64 rng(7);
  std::normal_distribution<float> n(0.f, 1.f);
  Case c;
  const std::int64_t sizes[3] = {70001, 513, 200000};  // not multiples of the work chunk
  for (std::int64_t s : sizes) {
    std::vector<core::bf16> p(static_cast<std::size_t>(s));
    for (auto& x : p) x = core::float_to_bf16(0.02f * n(rng));
    c.params.push_back(p);
  }
  for (int i : {0, 2}) {
    std::vector<core::bf16> g(c.params[static_cast<std::size_t>(i)].size());
    for (auto& x : g) x = core::float_to_bf16(1e-3f * n(rng));
    c.grads_bf16.push_back(g);
  }
  c.grad_fp32.resize(c.params[1].size());
  for (auto& x : c.grad_fp32) x = 1e-2f * n(rng);
  return c;
}

std::vector<runtime::HostTensor> tensors(const Case& c, std::vector<std::vector<core::bf16>>& out) {
  out = c.params;
  return {{c.grads_bf16[0].data(), false, out[0].data(), static_cast<std::int64_t>(out[0].size())},
          {c.grad_fp32.data(), true, out[1].data(), static_cast<std::int64_t>(out[1].size())},
          {c.grads_bf16[1].data(), false, out[2].data(), static_cast<std::int64_t>(out[2].size())}};
}

std::vector<double> widen(const std::vector<core::bf16>& v) {
  std::vector<double> o(v.size());
  for (std::size_t k = 0; k < v.size(); ++k) o[k] = core::bf16_to_float(v[k]);
  return o;
}

}  // namespace

TEST_CASE("host AdamW equals fp64 AdamW: two steps, clipped, weight decay, bf16 and fp32 gradients", "[runtime][adam]") {
  const Case c = make_case();
  AdamConfig cfg;
  cfg.lr = 1e-3, cfg.weight_decay = 0.01, cfg.max_grad_norm = 1e-3;
  runtime::HostAdamW opt(c.params, cfg, 3);
  AdamConfig ref_cfg = cfg;  // the hyper-parameters as the fp32 arithmetic sees them
  for (double* x : {&ref_cfg.lr, &ref_cfg.beta1, &ref_cfg.beta2, &ref_cfg.eps, &ref_cfg.weight_decay}) *x = double(float(*x));
  const std::vector<std::vector<double>> grads = {widen(c.grads_bf16[0]), std::vector<double>(c.grad_fp32.begin(), c.grad_fp32.end()),
                                                  widen(c.grads_bf16[1])};
  std::vector<runtime::AdamState> ref;
  for (const auto& p : c.params) ref.push_back(runtime::adam_state_from(widen(p)));
  std::vector<std::vector<core::bf16>> out;
  const auto ts = tensors(c, out);
  for (std::int64_t t = 1; t <= 2; ++t) {
    opt.step(ts);
    const runtime::ClipResult want = runtime::clip_gradients({&grads[0], &grads[1], &grads[2]}, cfg.max_grad_norm);
    CHECK(opt.last_clip().norm == Approx(want.norm).epsilon(1e-12));
    CHECK(want.coef < 0.5);  // clipping is active
    CHECK(opt.last_clip().coef == Approx(want.coef).epsilon(1e-6));
    double worst_master = 0, worst_m = 0, worst_v = 0;
    for (std::size_t i = 0; i < grads.size(); ++i) {
      const std::vector<double> m_prev = ref[i].m;
      runtime::adamw_reference(ref[i], grads[i], want.coef, t, ref_cfg);
      for (std::size_t k = 0; k < grads[i].size(); ++k) {
        const double w = opt.master(i)[k];
        worst_master = std::max(worst_master, std::abs(w - ref[i].master[k]) / (1e-6 * std::abs(ref[i].master[k]) + 1e-4 * cfg.lr));
        const double m_scale = ref_cfg.beta1 * std::abs(m_prev[k]) + (1 - ref_cfg.beta1) * std::abs(grads[i][k] * want.coef);
        worst_m = std::max(worst_m, std::abs(opt.m(i)[k] - ref[i].m[k]) / (1e-5 * m_scale + 1e-30));
        worst_v = std::max(worst_v, std::abs(opt.v(i)[k] - ref[i].v[k]) / (1e-5 * std::abs(ref[i].v[k]) + 1e-30));
        REQUIRE(out[i][k] == core::float_to_bf16(opt.master(i)[k]));  // the bf16 parameter is the rounded master
      }
    }
    INFO("step " << t << ": worst error / tolerance master " << worst_master << ", m " << worst_m << ", v " << worst_v);
    CHECK(worst_master <= 1.0);
    CHECK(worst_m <= 1.0);
    CHECK(worst_v <= 1.0);
  }
  CHECK(opt.steps() == 2);
  CHECK(opt.params() == 70001 + 513 + 200000);
}

TEST_CASE("host AdamW gives the same bits on 1 and 3 threads, a wrong tensor list or overlapping buffers are refused", "[runtime][adam]") {
  const Case c = make_case();
  AdamConfig cfg;
  runtime::HostAdamW one(c.params, cfg, 1), three(c.params, cfg, 3);
  std::vector<std::vector<core::bf16>> o1, o3;
  const auto t1 = tensors(c, o1), t3 = tensors(c, o3);
  one.step(t1), three.step(t3);
  CHECK(one.last_clip().norm == three.last_clip().norm);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(one.master(i) == three.master(i));
    CHECK(o1[i] == o3[i]);
  }
  CHECK_THROWS(one.step({t1[0], t1[1]}));  // every tensor, in order
  auto bad = t1;
  bad[1].n += 1;
  CHECK_THROWS(one.step(bad));
  auto overlap = t1;  // the parameters written over the gradient being read (restrict loops)
  overlap[1].grad = overlap[1].param + 1;
  overlap[1].grad_fp32 = false;
  CHECK_THROWS_AS(one.step(overlap), std::invalid_argument);
  CHECK(one.steps() == 1);  // refused before the step
}

TEST_CASE("host AdamW over two ranks' tensors takes the norm over both: the same step as one optimizer of all", "[runtime][adam]") {
  const Case c = make_case();
  AdamConfig cfg;
  cfg.lr = 1e-3, cfg.max_grad_norm = 1e-3;  // clipping active: the coefficient follows the global norm
  runtime::HostAdamW all(c.params, cfg, 2);
  std::vector<std::vector<core::bf16>> o_all;
  const auto t_all = tensors(c, o_all);
  // rank 0 holds tensors 0 and 1, rank 1 tensor 2 (the largest: a norm of rank 0's alone would be far off)
  runtime::HostAdamW r0({c.params[0], c.params[1]}, cfg, 1), r1({c.params[2]}, cfg, 1);
  std::vector<std::vector<core::bf16>> o0, o1;
  double mine[2] = {0, 0}, local0 = 0;
  std::barrier sync(2);
  auto sum_over_ranks = [&](int r) {
    return [&, r](double s) {
      if (r == 0) local0 = s;
      mine[r] = s;
      sync.arrive_and_wait();
      const double total = mine[0] + mine[1];
      sync.arrive_and_wait();  // both read before the next step writes
      return total;
    };
  };
  for (int t = 1; t <= 2; ++t) {
    all.step(t_all);
    std::vector<std::vector<core::bf16>> tmp;
    const auto ts = tensors(c, tmp);
    o0 = {std::vector<core::bf16>(o_all[0].size()), std::vector<core::bf16>(o_all[1].size())};  // outputs: zeros until written
    o1 = {std::vector<core::bf16>(o_all[2].size())};
    const std::vector<runtime::HostTensor> ts0 = {{ts[0].grad, false, o0[0].data(), ts[0].n}, {ts[1].grad, true, o0[1].data(), ts[1].n}};
    const std::vector<runtime::HostTensor> ts1 = {{ts[2].grad, false, o1[0].data(), ts[2].n}};
    std::thread peer([&] { r1.step(ts1, sum_over_ranks(1)); });
    r0.step(ts0, sum_over_ranks(0));
    peer.join();
    CHECK(r0.last_clip().norm == Approx(all.last_clip().norm).epsilon(1e-12));
    CHECK(r1.last_clip().norm == r0.last_clip().norm);
    CHECK(std::sqrt(local0) < 0.9 * all.last_clip().norm);  // rank 0's own norm is not the step's
    double worst = 0;
    auto cmp = [&](const std::vector<float>& got, const std::vector<float>& want) {
      REQUIRE(got.size() == want.size());
      for (std::size_t k = 0; k < got.size(); ++k)
        worst = std::max(worst, std::abs(double(got[k]) - want[k]) / (1e-6 * std::abs(want[k]) + 1e-4 * cfg.lr));
    };
    cmp(r0.master(0), all.master(0)), cmp(r0.master(1), all.master(1)), cmp(r1.master(0), all.master(2));
    INFO("step " << t << ": worst master difference / tolerance " << worst);
    CHECK(worst <= 1.0);
    std::int64_t not_written = 0;
    for (std::size_t k = 0; k < o1[0].size(); ++k) not_written += o1[0][k] != core::float_to_bf16(r1.master(0)[k]);
    for (std::size_t k = 0; k < o0[1].size(); ++k) not_written += o0[1][k] != core::float_to_bf16(r0.master(1)[k]);
    CHECK(not_written == 0);
  }
}
