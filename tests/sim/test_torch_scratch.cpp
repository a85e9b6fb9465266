// torch's in-op scratch sizes (sim/torch_scratch.hpp) against what torch 2.11's allocator recorded for
// each op alone on one H200 (records/validation/torch-scratch; docs/MODEL.md "Reserved memory").
#include <catch2/catch.hpp>

#include "sim/torch_scratch.hpp"

using namespace ulysses;

TEST_CASE("reduction scratch: Reduce.cuh's global buffer for a [rows, cols] column sum", "[sim][allocator]") {
  struct Case {
    std::int64_t rows, cols, bytes;
  };
  const Case cases[] = {
      {16384, 4096, 138412032},   {65536, 4096, 138412032},  {67584, 4096, 138412032}, {67588, 4096, 140509184},
      {131072, 4096, 268435456},  {262144, 4096, 536870912}, {16384, 2560, 138936320}, {49152, 2560, 138936320},
      {524288, 128, 138412032},   {4194304, 128, 268435456}, {32000, 128, 32768000},   {4096, 4096, 134217728},
      {16384, 1024, 134217728},   {16384, 8192, 138412032},  {100000, 5120, 256901120}, {16384, 64, 2097152},
      {16384, 999, 2173824},      {16384, 4098, 17834496},   {8000, 1536, 98304000},   {256, 4096, 0},
      {1000, 4096, 0},            {700, 3000, 0},
  };
  for (const Case& c : cases) {
    INFO(c.rows << " x " << c.cols);
    CHECK(reduction_scratch_bytes(c.rows, c.cols, 4) == c.bytes);
  }
}

TEST_CASE("sdpa backward and embedding backward scratch", "[sim][allocator]") {
  // cuDNN's backward workspace, GQA 32/8 and MHA 32/32 at D = 128 (requested bytes)
  CHECK(sdpa_backward_scratch_bytes(16384, 32, 8, 128) == 538968320);
  CHECK(sdpa_backward_scratch_bytes(32768, 32, 8, 128) == 1077936384);
  CHECK(sdpa_backward_scratch_bytes(131072, 32, 8, 128) == 4311744768);
  CHECK(sdpa_backward_scratch_bytes(16384, 32, 32, 128) == 270532864);
  CHECK(sdpa_backward_scratch_bytes(131072, 32, 32, 128) == 2164261120);
  // the embedding's partial-segment sums: floor(T/10) + min(T, V) rows of h fp32
  CHECK(embedding_backward_partials_bytes(16384, 4096, 128256) == 295272448);
  CHECK(embedding_backward_partials_bytes(131072, 4096, 128256) == 2316091392);
  CHECK(embedding_backward_partials_bytes(3072, 4096, 128256) == 0);
}
