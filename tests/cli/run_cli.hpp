#pragma once
// Runs the built `ulysses` binary (ULYSSES_BIN) and captures exit code, stdout and stderr.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

namespace ulysses::test {

struct CliResult {
  int rc = -1;
  std::string out, err;
};

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// A fresh folder under the system temp dir, removed when the object goes out of scope.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::random_device rd;
    path = std::filesystem::temp_directory_path() /
           ("ulysses-test-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

// args: everything after the binary, already shell-quoted where needed.
inline CliResult run_cli(const std::string& args) {
  TempDir tmp;
  const std::string out = tmp / "stdout", err = tmp / "stderr";
  const std::string cmd = std::string("'") + ULYSSES_BIN + "' " + args + " >'" + out + "' 2>'" + err + "'";
  const int status = std::system(cmd.c_str());
  CliResult r;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

// run_cli with the launcher variables SLURM_PROCID, SLURM_NTASKS, RANK and WORLD_SIZE unset, then
// `assignments` ("RANK=1 WORLD_SIZE=4") set.
inline CliResult run_cli_env(const std::string& assignments, const std::string& args) {
  const std::string cmd = std::string("env -u SLURM_PROCID -u SLURM_NTASKS -u RANK -u WORLD_SIZE ") + assignments + " '" +
                          ULYSSES_BIN + "' " + args;
  TempDir tmp;
  const std::string out = tmp / "stdout", err = tmp / "stderr";
  const int status = std::system((cmd + " >'" + out + "' 2>'" + err + "'").c_str());
  CliResult r;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

inline std::string source_path(const std::string& rel) { return std::string(ULYSSES_SOURCE_DIR) + "/" + rel; }

// A stored run record (records/, docs/DESIGN.md "Run records"): the one place tests name that folder.
inline std::string record_path(const std::string& rel) { return std::string(ULYSSES_RECORDS_DIR) + "/" + rel; }

// `validate --stored rec --json <dir>/<out>`: exits 0, or 1 with each missed target on a 'missed:' line;
// returns the re-prediction's JSON text.
inline std::string repredict_stored(const std::string& rec, const TempDir& dir, const std::string& out) {
  const CliResult r = run_cli("validate --stored '" + rec + "' --json '" + (dir / out) + "'");
  INFO(r.err);
  REQUIRE((r.rc == 0 || r.rc == 1));
  CHECK((r.rc == 0) == (r.out.find("missed:") == std::string::npos));
  return slurp(dir / out);
}

inline int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

}  // namespace ulysses::test
