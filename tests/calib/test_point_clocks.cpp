// calib/point_clocks.hpp against NVML's stand-in (tests/runtime/fake_nvml.cpp: GPU 0000:19:00.0 at 1400 MHz and
// 690 W): a point long enough to hold samples gets that GPU's clock and power (a window shorter than the period
// holds none: tests/runtime/test_power_summary.cpp "clock in windows"), and without NVML, that GPU or a bus id
// nothing is sampled and the summary says why.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

#include "calib/point_clocks.hpp"

namespace {
struct NvmlLib {  // ULYSSES_NVML_LIB for one test, unset after it
  explicit NvmlLib(const char* path) { setenv("ULYSSES_NVML_LIB", path, 1); }
  ~NvmlLib() { unsetenv("ULYSSES_NVML_LIB"); }
};
void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }
}  // namespace

TEST_CASE("point clocks: each calibration point's SM clock and power from NVML, or why none", "[calib][power]") {
  SECTION("the stand-in's GPU") {
    const NvmlLib lib(ULYSSES_FAKE_NVML);
    ulysses::calib::PointClocks pc("0000:19:00.0", 2);
    CHECK(pc.around("attn S=8192", [] { sleep_ms(60); return 7; }) == 7);  // f's value comes back
    CHECK_THROWS_AS(pc.around("threw", [] { sleep_ms(30); throw std::runtime_error("x"); }), std::runtime_error);
    CHECK(pc.of("attn S=8192") == nullptr);  // not stopped yet
    pc.stop();
    pc.stop();  // once
    const auto* c = pc.of("attn S=8192");
    REQUIRE(c != nullptr);
    CHECK(c->samples >= 5);
    CHECK(c->sm_mhz_median == 1400);
    CHECK(c->watts_mean == Approx(690));
    CHECK(pc.of("never timed") == nullptr);
    CHECK(pc.of("threw") != nullptr);  // a throwing point's window closed too
    CHECK(pc.summary() == "median 1400 MHz (1400-1400) over 2 of 2 points");
  }
  SECTION("NVML without that GPU") {
    const NvmlLib lib(ULYSSES_FAKE_NVML);
    ulysses::calib::PointClocks pc("0000:aa:00.0", 2);
    pc.around("p", [] { sleep_ms(20); });
    pc.stop();
    CHECK(pc.of("p") == nullptr);
    CHECK(pc.summary() == "not sampled (NVML has no GPU of PCI bus id '0000:aa:00.0')");
  }
  SECTION("no bus id from CUDA") {
    const NvmlLib lib(ULYSSES_FAKE_NVML);
    ulysses::calib::PointClocks pc("", 2);
    pc.stop();
    CHECK(pc.summary() == "not sampled (CUDA gave no PCI bus id for the device)");
  }
  SECTION("no NVML") {
    const NvmlLib lib("/nonexistent/libnvidia-ml.so.1");
    ulysses::calib::PointClocks pc("0000:19:00.0", 2);
    pc.stop();
    CHECK(pc.summary() == "not sampled (ULYSSES_NVML_LIB: cannot open /nonexistent/libnvidia-ml.so.1)");
  }
}
