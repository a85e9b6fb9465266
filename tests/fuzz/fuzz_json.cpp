// libFuzzer target for the JSON inputs, chosen at compile time (tests/fuzz/CMakeLists.txt):
// ULYSSES_FUZZ_KIND 1: stored records, read as `ulysses validate --stored FILE` and
//   `ulysses capacity --stored FILE` in-process (block and step validation records, block and
//   step capacity records: eval/record_in.cpp load_record, eval/step_record.cpp);
// ULYSSES_FUZZ_KIND 2: calibration raw files of `calibrate --from-raw` (calib/raw_file.cpp),
//   derived onto the committed H200 calibration.
// Bad input may only end in an InputError.
#include <cstdint>
#include <sstream>

#include "calib/raw_file.hpp"
#include "cli/options.hpp"
#include "sim/config.hpp"
#include "tests/fuzz/fuzz_common.hpp"

using namespace ulysses;

#if ULYSSES_FUZZ_KIND == 1
int run_command(const std::string& name, std::vector<std::string> args) {
  for (auto& c : cli::registry()) {
    if (name != c.name) continue;
    args.insert(args.begin(), "ulysses " + name);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    return c.fn(static_cast<int>(args.size()), argv.data());
  }
  std::abort();
}
#endif

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::silence_stdout();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = fuzz::write_input(data, size, "input.json");
#if ULYSSES_FUZZ_KIND == 1
  fuzz::expect_input_errors_only([&] { run_command("validate", {"--stored", path}); });
  fuzz::expect_input_errors_only([&] { run_command("capacity", {"--stored", path}); });
#elif ULYSSES_FUZZ_KIND == 2
  static const Calibration base = load_profile("h200-sxm-141gb").calibrated;
  fuzz::expect_input_errors_only([&] {
    const calib::CalibrationRaw raw = calib::read_calibration_raw(path);
    Calibration c = base;
    std::ostringstream out;
    calib::apply_calibration_raw(raw, "fuzz", c, out);
    (void)calibration_to_yaml(c);
  });
#else
#error "ULYSSES_FUZZ_KIND must be 1 or 2"
#endif
  return 0;
}
