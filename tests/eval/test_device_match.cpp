// device_profile_note: a run on another GPU than the profile's is said in one line; one family is not.
// device_with_kernels: a set's device line names every attention kernel its cases ran.
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

TEST_CASE("device line of a set: every attention kernel its cases ran", "[eval][device]") {
  const std::string line = "1x NVIDIA H100 80GB HBM3 (single process), attention kernel reference, exchange nccl";
  CHECK(eval::device_with_kernels(line, {}) == line);
  CHECK(eval::device_with_kernels(line, {{"ulysses_reference", 3}}) == line);  // one kernel: as it is
  CHECK(eval::device_with_kernels(line, {{"ulysses_flash", 9}, {"ulysses_reference", 1}}) ==
        "1x NVIDIA H100 80GB HBM3 (single process), attention kernels ulysses_flash (9 cases), ulysses_reference (1 case), "
        "exchange nccl");
  CHECK(eval::device_with_kernels("NVIDIA H200, attention kernel flash", {{"a", 1}, {"b", 2}}) ==
        "NVIDIA H200, attention kernels a (1 case), b (2 cases)");  // the kernel last on the line
  CHECK(eval::device_with_kernels("NVIDIA H200", {{"a", 1}, {"b", 2}}) == "NVIDIA H200; attention kernels a (1 case), b (2 cases)");
}
