// device_profile_note: a run on another GPU than the profile's is said in one line; one family is not.
#include <catch2/catch.hpp>

#include <string>

#include "eval/device_match.hpp"
#include "sim/config.hpp"

using namespace ulysses;

TEST_CASE("device vs profile: the GPU's model token decides", "[eval][device]") {
  CHECK(eval::gpu_family("NVIDIA H100 80GB HBM3") == "H100");
  CHECK(eval::gpu_family("NVIDIA H100 SXM5 80GB") == "H100");
  CHECK(eval::gpu_family("1x NVIDIA H200 (single process, 1 thread(s), NCCL 2.28)") == "H200");
  CHECK(eval::gpu_family("NVIDIA A100 SXM4 80GB") == "A100");
  CHECK(eval::gpu_family("host CPU (CPU reference backend, threads as ranks)").empty());
  CHECK(eval::gpu_family("").empty());
  CHECK(eval::gpu_family("cpu: 2 threads, 13th Gen Intel(R) Core(TM) i9-13900K").empty());

  Scenario sc;
  sc.hw = load_profile("h200-sxm-141gb");
  const std::string note = eval::device_profile_note(sc, "NVIDIA H100 80GB HBM3");
  CHECK(note.find("measured on NVIDIA H100 80GB HBM3, predicted for profile h200-sxm-141gb") != std::string::npos);
  CHECK(note.find('\n') == std::string::npos);
  CHECK(eval::device_profile_note(sc, "NVIDIA H200").empty());
  CHECK(eval::device_profile_note(sc, "").empty());  // a run that names no device
  sc.hw = load_profile("h100-sxm-80gb");
  CHECK(eval::device_profile_note(sc, "NVIDIA H100 80GB HBM3").empty());
  sc.hw = load_profile("cpu-local");
  CHECK(eval::device_profile_note(sc, "NVIDIA H100 80GB HBM3").empty());  // the CPU profile names no GPU model
}
