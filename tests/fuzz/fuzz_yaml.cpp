// libFuzzer target for one YAML loader, chosen at compile time (tests/fuzz/CMakeLists.txt):
// ULYSSES_FUZZ_KIND 1 scenario, 2 model preset, 3 hardware profile, 4 sweep spec, 5 validation set,
// 6 Accelerate config YAML, 7 DeepSpeed config JSON (sim/run_config.hpp, read into a scenario).
// Bad input may only end in an InputError; a loaded scenario must also survive to_yaml and load
// back (the documented round trip); a loaded profile with a calibrated section must survive
// write_calibration (calib/profile_out.cpp) on a copy of itself.
#include <cstdint>
#include <filesystem>

#include "calib/profile_out.hpp"
#include "sim/config.hpp"
#include "sim/run_config.hpp"
#include "tests/fuzz/fuzz_common.hpp"
#if ULYSSES_FUZZ_KIND == 5
#include "eval/validation_set.hpp"
#endif

using namespace ulysses;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = fuzz::write_input(data, size, "input.yaml");
  fuzz::expect_input_errors_only([&] {
#if ULYSSES_FUZZ_KIND == 1
    const Scenario sc = load_scenario(path);
    const std::string again = fuzz::scratch_dir() + "/again.yaml";
    { std::ofstream(again) << to_yaml(sc); }
    try {
      (void)load_scenario(again);
    } catch (const core::InputError& e) {
      std::fprintf(stderr, "fuzz: to_yaml of a loaded scenario does not load back: %s\n", e.what());
      std::abort();
    }
#elif ULYSSES_FUZZ_KIND == 2
    (void)load_model(path);
#elif ULYSSES_FUZZ_KIND == 3
    const HardwareProfile hw = load_profile(path);
    if (hw.has_calibration) {
      const std::string copy = fuzz::scratch_dir() + "/copy.yaml";
      std::filesystem::copy_file(path, copy, std::filesystem::copy_options::overwrite_existing);
      calib::write_calibration(copy, hw.calibrated);
    }
#elif ULYSSES_FUZZ_KIND == 4
    (void)load_sweep(path);
#elif ULYSSES_FUZZ_KIND == 5
    (void)eval::load_validation_set(path);
#elif ULYSSES_FUZZ_KIND == 6 || ULYSSES_FUZZ_KIND == 7
    Scenario sc;
    sc.model.hidden = 4096;
    sc.hw.gpus_per_node = 8;
    const RunConfigRead rc = ULYSSES_FUZZ_KIND == 6 ? apply_run_configs(sc, path, "") : apply_run_configs(sc, "", path);
    check_run_configs(rc, sc);
#else
#error "ULYSSES_FUZZ_KIND must be 1..7"
#endif
  });
  return 0;
}
