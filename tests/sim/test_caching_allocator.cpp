// The allocator simulation (sim/caching_allocator.hpp) on sequences whose mapped bytes follow by hand
// from the rules docs/MODEL.md "Reserved memory" states (round_size, pools, best fit, the segment's
// end taken last, growth by whole granules joined with a free end block, coalescing on free).
#include <catch2/catch.hpp>

#include "sim/caching_allocator.hpp"

using namespace ulysses;

namespace {
constexpr std::int64_t MiB = 1 << 20;
}

TEST_CASE("allocator sim: rounding and pools", "[sim][allocator]") {
  CHECK(alloc_round_size(1) == 512);
  CHECK(alloc_round_size(512) == 512);
  CHECK(alloc_round_size(513) == 1024);
  CachingAllocatorSim a;
  a.malloc(100, 0);                  // small pool: one 2 MiB granule
  CHECK(a.reserved() == 2 * MiB);
  a.malloc(MiB, 0);                  // 1 MiB is still small: fits the same granule's rest
  CHECK(a.reserved() == 2 * MiB);
  a.malloc(MiB + 1, 0);              // large pool: one 20 MiB granule
  CHECK(a.reserved() == 22 * MiB);
  a.malloc(30 * MiB, 0);             // 30 MiB on top of the 19 MiB left: 11 more -> one granule
  CHECK(a.reserved() == 42 * MiB);
  a.malloc(30 * MiB, 1);             // another stream maps its own segment: two granules
  CHECK(a.reserved() == 82 * MiB);
  CHECK(a.reserved_on(1) == 40 * MiB);
  CHECK(a.reserved_on(0) == 42 * MiB);
}

TEST_CASE("allocator sim: best fit, the segment's end last, coalescing", "[sim][allocator]") {
  CachingAllocatorSim s;
  const auto a = s.malloc(10 * MiB, 0);           // [0, 10); maps 20
  s.malloc(3 * MiB / 2, 0);                       // [10, 11.5); the end block [11.5, 20) is free
  s.free(a);                                      // a hole [0, 10)
  const auto c = s.malloc(8 * MiB, 0);            // fits the end block (8.5) and the hole (10): the hole
  CHECK(s.reserved() == 20 * MiB);
  s.malloc(17 * MiB / 2, 0);                      // only the end block fits (8.5): no growth
  CHECK(s.reserved() == 20 * MiB);
  CHECK(s.allocated() == 18 * MiB);
  s.free(c);                                      // [0, 8) joins the free [8, 10): a 10 MiB hole
  s.malloc(10 * MiB, 0);                          // fits it exactly
  CHECK(s.reserved() == 20 * MiB);
  s.malloc(MiB + 1, 0);                           // nothing free: grows by one granule
  CHECK(s.reserved() == 40 * MiB);
  CHECK(s.peak_reserved() == 40 * MiB);
}

TEST_CASE("allocator sim: growth joins the free end block", "[sim][allocator]") {
  CachingAllocatorSim s;
  const auto a = s.malloc(15 * MiB, 0);     // [0, 15), end block [15, 20) free
  const auto b = s.malloc(12 * MiB, 0);     // 5 free at the end: 7 more -> one granule; [15, 27)
  CHECK(s.reserved() == 40 * MiB);
  s.free(a);
  s.free(b);                                // everything free again: one 40 MiB block
  s.malloc(39 * MiB, 0);
  CHECK(s.reserved() == 40 * MiB);
  s.malloc(22 * MiB, 0);                    // 1 MiB free at the end: 21 more -> two granules
  CHECK(s.reserved() == 80 * MiB);
  CHECK(s.peak_allocated() == 61 * MiB);
}

TEST_CASE("allocator sim: a free of an unknown or freed block changes nothing", "[sim][allocator]") {
  CachingAllocatorSim s;
  const auto a = s.malloc(4 * MiB, 0);
  s.free(a);
  s.free(a);
  s.free(12345);
  CHECK(s.allocated() == 0);
  CHECK(s.reserved() == 20 * MiB);
}
