#pragma once
// Shared by the libFuzzer targets of tests/fuzz/: the input written to a temp file (the loaders
// take paths), stdout silenced, and the one rule of every target: bad input may end in an
// InputError (core/errors.hpp); any other exception escaping is a bug and aborts (a crash report).
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>

#include "core/errors.hpp"

namespace ulysses::fuzz {

// One private folder per process (parallel fuzz jobs do not share files), removed at exit.
inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    const char* t = std::getenv("TMPDIR");
    std::string tmpl = std::string(t && *t ? t : "/tmp") + "/ulysses-fuzz-XXXXXX";
    if (!::mkdtemp(tmpl.data())) std::abort();
    static std::string keep = tmpl;
    std::atexit([] { std::string cmd = "rm -rf '" + keep + "'"; (void)std::system(cmd.c_str()); });
    return tmpl;
  }();
  return dir;
}

// Writes the input to <scratch>/<name> and returns the path.
inline std::string write_input(const std::uint8_t* data, std::size_t size, const std::string& name) {
  const std::string path = scratch_dir() + "/" + name;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  f.close();
  if (!f) std::abort();
  return path;
}

// The commands print tables; the fuzzer needs none of it.
inline void silence_stdout() {
  std::fflush(stdout);
  const int fd = ::open("/dev/null", O_WRONLY);
  if (fd >= 0) ::dup2(fd, 1), ::close(fd);
}

// Runs f; an InputError is the expected end of bad input, anything else aborts with its message.
template <class F>
void expect_input_errors_only(F&& f) {
  try {
    f();
  } catch (const core::InputError&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: exception other than InputError escaped: %s\n", e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "fuzz: non-standard exception escaped\n");
    std::abort();
  }
}

}  // namespace ulysses::fuzz
