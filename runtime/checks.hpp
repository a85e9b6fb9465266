#pragma once
// Correctness checks shared by the backends (nccl-tests style: count the wrong elements).
#include <cstdint>
#include <string>

#include "runtime/backend.hpp"

namespace ulysses::runtime {

// Bit-exact comparison of raw 16-bit words (bf16): wrong = elements whose bits differ.
Check check_bits(std::string name, const std::uint16_t* got, const std::uint16_t* want, std::int64_t n);

// Tolerance comparison of a result against an fp64 oracle. Element i is wrong when
//   |got_i - ref_i| > tol * (|ref_i| + rms(ref))   or got_i is not finite.
// The rms(ref) floor makes the rule scale-free and keeps elements near zero (where a relative
// error means nothing after cancellation) from failing on rounding noise.
// Check.max_abs_err is max_i |got_i - ref_i| / (|ref_i| + rms(ref)), in units of the rule,
// so that it reads against Check.tolerance.
Check check_close(std::string name, const float* got, const double* ref, std::int64_t n, double tol);

// Same rule with a per-element term added to the scale: |got_i - ref_i| <= tol * (|ref_i| +
// rms(ref) + extra_scale_i). Used where the result is a sum of addends that were each rounded
// to bf16 (the kv-head gradients summed over R replicas): extra_scale_i = sum of |addend_i|.
Check check_close(std::string name, const float* got, const double* ref, std::int64_t n, double tol,
                  const double* extra_scale);

// Tolerance of the Ulysses-vs-single-rank checks of both backends (rule in runtime/verify.cpp).
inline constexpr double kBf16AttentionTol = 1.0 / 64;  // 2^-6 = 4 bf16 rounding units (2^-8)

}  // namespace ulysses::runtime
