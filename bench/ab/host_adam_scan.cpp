// Lab: runtime/host_adam.cpp's step time per parameter on one tensor (calibrate's measurement: one [F, h] tensor)
// and on a whole step's tensors (llama-3.1-8b cut to 2 layers: the embedding and norms with fp32 gradients, the
// lm_head and the layers' matrices with bf16), each step timed alone, to see whether the step's rate is the
// calibrated one and how much it varies. Built on request: `cmake --build build-out --target host_adam_scan`;
// `host_adam_scan [threads] [steps] [one]` (one: only calibrate's tensor). Prints the host's transparent huge page setting with it.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "core/bf16.hpp"
#include "runtime/host_adam.hpp"

namespace {

using ulysses::core::bf16;

struct Shape {
  std::int64_t n;
  bool grad_fp32;
};

std::vector<Shape> llama_two_layers() {
  const std::int64_t h = 4096, V = 128256, F = 14336, KD = 1024;
  std::vector<Shape> s = {{V * h, true}, {h, true}, {V * h, false}};
  for (int l = 0; l < 2; ++l)
    for (const Shape x : {Shape{h, true}, Shape{h * h, false}, Shape{KD * h, false}, Shape{KD * h, false}, Shape{h * h, false},
                          Shape{h, true}, Shape{F * h, false}, Shape{F * h, false}, Shape{F * h, false}})
      s.push_back(x);
  return s;
}

void scan(const char* name, const std::vector<Shape>& shapes, int threads, int steps, ulysses::runtime::HostAdamOptions o) {
  std::uint32_t seed = 12345;
  auto next = [&] { return seed = seed * 1664525u + 1013904223u; };
  std::vector<std::vector<bf16>> params;
  std::vector<std::vector<float>> g32;
  std::vector<std::vector<bf16>> g16, out;
  std::int64_t total = 0;
  for (const Shape& s : shapes) {
    std::vector<bf16> p(static_cast<std::size_t>(s.n));
    for (auto& x : p) x = ulysses::core::float_to_bf16(0.02f * (float(next() >> 8) / 16777216.f - 0.5f));
    params.push_back(std::move(p));
    total += s.n;
  }
  std::vector<ulysses::runtime::HostTensor> ts;
  out = params;  // the step writes every parameter: unchanged values after it mean no update
  for (const Shape& s : shapes) {
    if (s.grad_fp32) {
      g32.emplace_back(static_cast<std::size_t>(s.n));
      for (auto& x : g32.back()) x = 1e-3f * (float(next() >> 8) / 16777216.f - 0.5f);
    } else {
      g16.emplace_back(static_cast<std::size_t>(s.n));
      for (auto& x : g16.back()) x = ulysses::core::float_to_bf16(1e-3f * (float(next() >> 8) / 16777216.f - 0.5f));
    }
  }
  std::size_t i32 = 0, i16 = 0;
  for (std::size_t i = 0; i < shapes.size(); ++i)
    ts.push_back({shapes[i].grad_fp32 ? static_cast<const void*>(g32[i32++].data()) : static_cast<const void*>(g16[i16++].data()),
                  shapes[i].grad_fp32, out[i].data(), shapes[i].n});
  ulysses::runtime::HostAdamW opt(params, ulysses::runtime::AdamConfig{}, threads, o);
  auto check = [&](const char* when) {  // every parameter finite, and the update moved them off their start
    std::size_t moved = 0;
    for (std::size_t i = 0; i < out.size(); ++i)
      for (std::size_t k = 0; k < out[i].size(); ++k) {
        if (!std::isfinite(ulysses::core::bf16_to_float(out[i][k]))) {
          std::printf("%s: a non-finite parameter %s\n", name, when);
          std::exit(1);
        }
        moved += out[i][k] != params[i][k];
      }
    if (moved == 0) {
      std::printf("%s: no parameter changed %s\n", name, when);
      std::exit(1);
    }
  };
  opt.step(ts);  // warm-up, validated before anything is timed
  check("after the warm-up step");
  std::vector<double> t;
  for (int k = 0; k < steps; ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    opt.step(ts);
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  check("after the timed steps");
  std::vector<double> s = t;
  std::sort(s.begin(), s.end());
  const std::string how = std::string(o.dynamic_units ? "dynamic" : "static") + (o.huge_pages ? " huge" : " 4K");
  std::printf("%-22s %-13s %12lld %8d %9.2f %9.2f %9.2f %9.4f  ", name, how.c_str(), static_cast<long long>(total), threads, s.front() * 1e3,
              s[s.size() / 2] * 1e3, s.back() * 1e3, s[s.size() / 2] / double(total) * 1e9);
  for (double x : t) std::printf(" %.1f", x * 1e3);
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::stoi(argv[1]) : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int steps = argc > 2 ? std::stoi(argv[2]) : 7;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::string thp;
  std::getline(std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled"), thp);
  std::printf("transparent huge pages: %s\n", thp.empty() ? "(unknown)" : thp.c_str());
  std::printf("#  tensors                work                 params  threads       min    median       max  ns/param   each step (ms)\n");
  std::printf("#                                                                         (ms)      (ms)      (ms)\n");
  const ulysses::runtime::HostAdamOptions before{false, false}, after{true, true}, dyn{true, false}, huge{false, true};
  const std::vector<Shape> one = {{14336 * 4096, false}}, llama = llama_two_layers();
  const bool one_only = argc > 3 && std::string(argv[3]) == "one";  // calibrate's tensor alone
  for (int round = 0; round < 2; ++round) {  // alternating, so that a drift of the host shows as such
    scan("one [14336, 4096]", one, threads, steps, before);
    scan("one [14336, 4096]", one, threads, steps, after);
    if (one_only) continue;
    scan("llama-3.1-8b x2 layers", llama, threads, steps, before);
    scan("llama-3.1-8b x2 layers", llama, threads, steps, after);
  }
  if (one_only) return 0;
  scan("llama-3.1-8b x2 layers", llama, threads, steps, dyn);
  scan("llama-3.1-8b x2 layers", llama, threads, steps, huge);
  return 0;
}
