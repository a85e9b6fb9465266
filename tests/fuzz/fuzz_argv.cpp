// libFuzzer target for the command line: the input is split into argv words (at newlines, NULs
// and spaces); the first word picks a command by its first byte among those that only read and
// print (plan, predict, validate --stored, capacity --stored; sweep, report, run, compare, bench
// and calibrate write files, spawn processes or run backends and are not called here), and the
// command's function runs in-process as cli/main.cpp calls it. Bad input may only end in an
// InputError (exit 2); any other exception, crash or sanitizer report is a bug.
#include <cstdint>
#include <string>
#include <vector>

#include "cli/options.hpp"
#include "tests/fuzz/fuzz_common.hpp"

using namespace ulysses;

namespace {
const char* const kCommands[] = {"plan", "predict", "plan", "predict", "validate", "capacity"};
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::silence_stdout();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0 || size > 4096) return 0;
  const std::string name = kCommands[data[0] % (sizeof(kCommands) / sizeof(kCommands[0]))];
  std::vector<std::string> args{"ulysses " + name};
  std::string word;
  for (std::size_t i = 1; i < size; ++i) {
    const char c = static_cast<char>(data[i]);
    if (c == '\n' || c == '\0' || c == ' ') {
      if (!word.empty()) args.push_back(word), word.clear();
    } else {
      word += c;
    }
  }
  if (!word.empty()) args.push_back(word);
  // validate and capacity only with --stored (the other modes run backends)
  if (name == "validate" || name == "capacity") {
    bool stored = false;
    for (const auto& a : args) stored = stored || a.rfind("--stored", 0) == 0;
    for (const auto& a : args)
      if (a.rfind("--set", 0) == 0 || a.rfind("--backend", 0) == 0 || a.rfind("--out", 0) == 0 || a.rfind("--json", 0) == 0 ||
          a.rfind("--se", 0) == 0 || a.rfind("--b", 0) == 0 || a.rfind("--o", 0) == 0 || a.rfind("--j", 0) == 0)
        return 0;
    if (!stored) return 0;
  }
  for (const auto& a : args)
    if (a.rfind("--js", 0) == 0 || a.rfind("--out", 0) == 0 || a.rfind("--em", 0) == 0) return 0;  // no files written
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& c : cli::registry()) {
    if (name != c.name) continue;
    fuzz::expect_input_errors_only([&] { c.fn(static_cast<int>(args.size()), argv.data()); });
    return 0;
  }
  std::abort();
}
