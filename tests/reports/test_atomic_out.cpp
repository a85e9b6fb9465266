// reports/file_out: atomic writes (nothing partial under the final name, unique temporaries,
// write errors thrown), lock files, the stdout check and the stop-on-signal flag.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "reports/file_out.hpp"
#include "reports/trace.hpp"
#include "tests/cli/run_cli.hpp"

namespace fs = std::filesystem;
using ulysses::test::slurp;
using ulysses::test::TempDir;

namespace {

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

void put(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// Runs fn in a child process; returns its exit code (-1 when it died of a signal).
template <class F>
int in_child(F fn) {
  std::cout.flush();
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(fn());
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("write_file_atomic writes the text and leaves no temporary", "[reports][atomic]") {
  TempDir dir;
  const std::string path = dir / "a.json";
  ulysses::reports::write_file_atomic(path, "{\"x\": 1}\n");
  CHECK(slurp(path) == "{\"x\": 1}\n");
  ulysses::reports::write_file_atomic(path, "second\n");  // replaces
  CHECK(slurp(path) == "second\n");
  CHECK(names_in(dir.path) == std::vector<std::string>{"a.json"});
}

TEST_CASE("write_file_atomic into a missing folder throws naming the file", "[reports][atomic]") {
  TempDir dir;
  const std::string path = dir / "no/such/folder/a.json";
  try {
    ulysses::reports::write_file_atomic(path, "x");
    FAIL("no exception");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()).find(path) != std::string::npos);
  }
  CHECK(names_in(dir.path).empty());
}

TEST_CASE("write_file_atomic refuses to replace something that is not a regular file", "[reports][atomic]") {
  TempDir dir;
  const std::string fifo = dir / "pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  CHECK_THROWS_WITH(ulysses::reports::write_file_atomic(fifo, "x"), Catch::Contains("not a regular file"));
  struct stat st {};
  REQUIRE(::stat(fifo.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
  CHECK(names_in(dir.path) == std::vector<std::string>{"pipe"});
}

TEST_CASE("an AtomicFile that is not committed leaves the old file as it was and no temporary", "[reports][atomic]") {
  TempDir dir;
  const std::string path = dir / "rows.csv";
  put(path, "old,complete\n");
  {
    ulysses::reports::AtomicFile f(path);
    f.write("new,partial\n");
    f.finish();  // complete on disk, but never renamed
    CHECK(fs::exists(f.temp_path()));
    CHECK(fs::path(f.temp_path()).parent_path() == dir.path);
  }
  CHECK(slurp(path) == "old,complete\n");
  CHECK(names_in(dir.path) == std::vector<std::string>{"rows.csv"});
  {
    ulysses::reports::AtomicFile f(dir / "fresh.csv");
    f.write("a\n");
  }
  CHECK(!fs::exists(dir / "fresh.csv"));
  CHECK(names_in(dir.path) == std::vector<std::string>{"rows.csv"});
}

TEST_CASE("AtomicFile: unique temporaries per writer, commit renames, large writes arrive whole", "[reports][atomic]") {
  TempDir dir;
  const std::string path = dir / "big.csv";
  ulysses::reports::AtomicFile a(path), b(path);
  CHECK(a.temp_path() != b.temp_path());
  CHECK(a.temp_path().find(std::to_string(::getpid())) != std::string::npos);
  std::string big;
  for (int i = 0; i < 300000; ++i) big += std::to_string(i) + "\n";  // ~2 MB: more than the buffer
  a.write("header\n");
  a.write(big);
  b.write("other\n");
  a.commit();
  CHECK(a.committed());
  CHECK(slurp(path) == "header\n" + big);
  b.discard();
  CHECK(names_in(dir.path) == std::vector<std::string>{"big.csv"});
}

TEST_CASE("AtomicFile: a write error (file size limit, as a full disk) throws naming the file, removes the temporary", "[reports][atomic]") {
  TempDir dir;
  const std::string path = dir / "out.csv";
  put(path, "old\n");
  const int rc = in_child([&] {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit lim{4096, 4096};
    if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) return 10;
    try {
      ulysses::reports::AtomicFile f(path);
      for (int i = 0; i < 1000; ++i) f.write(std::string(1000, 'x') + "\n");
      f.commit();
      return 11;  // the error went unnoticed
    } catch (const std::runtime_error& e) {
      const std::string what = e.what();
      if (what.find("cannot write '" + path + "'") == std::string::npos) return 12;
      if (what.find('\n') != std::string::npos) return 13;
      return 0;
    }
  });
  CHECK(rc == 0);
  CHECK(slurp(path) == "old\n");
  CHECK(names_in(dir.path) == std::vector<std::string>{"out.csv"});
}

TEST_CASE("LockFile: a second holder fails at once naming the lock, free again after release", "[reports][atomic]") {
  TempDir dir;
  const std::string lock = dir / "s.lock";
  {
    ulysses::reports::LockFile first(lock);
    CHECK_THROWS_WITH(ulysses::reports::LockFile(lock), Catch::Contains(lock) && Catch::Contains("locked"));
  }
  CHECK_NOTHROW(ulysses::reports::LockFile(lock));
}

TEST_CASE("check_stdout reports output lost on a full device", "[reports][atomic]") {
  const int rc = in_child([] {
    const int fd = ::open("/dev/full", O_WRONLY);
    if (fd < 0) return 20;
    ::dup2(fd, STDOUT_FILENO);
    std::cout << std::string(100000, 'x') << "\n";
    try {
      ulysses::reports::check_stdout();
      return 21;
    } catch (const std::runtime_error& e) {
      return std::string(e.what()).find("standard output") != std::string::npos ? 0 : 22;
    }
  });
  CHECK(rc == 0);
}

TEST_CASE("StopOnSignals turns SIGINT and SIGTERM into a flag", "[reports][atomic]") {
  {
    ulysses::reports::StopOnSignals stop;
    CHECK(ulysses::reports::StopOnSignals::stop_signal() == 0);
    ::raise(SIGTERM);
    CHECK(ulysses::reports::StopOnSignals::stop_signal() == SIGTERM);
  }
  CHECK(ulysses::reports::exit_code_of_signal(SIGINT) == 130);
  CHECK(ulysses::reports::exit_code_of_signal(SIGTERM) == 143);
}

TEST_CASE("check_can_write probes the folder without creating the file", "[reports][atomic]") {
  TempDir dir;
  CHECK_NOTHROW(ulysses::reports::check_can_write(dir / "later.json"));
  CHECK(names_in(dir.path).empty());
  CHECK_THROWS_WITH(ulysses::reports::check_can_write(dir / "missing/later.json"), Catch::Contains("missing/later.json"));
}

TEST_CASE("write_chrome_trace writes the whole trace atomically", "[reports][atomic]") {
  TempDir dir;
  ulysses::reports::TraceProcess p{"predicted", {{"rank 0", {{"attn.fwd", 0, 5, "phase", nullptr}}}}};
  ulysses::reports::write_chrome_trace(dir / "t.json", {p});
  const auto j = nlohmann::json::parse(slurp(dir / "t.json"));
  CHECK(j["traceEvents"].size() == 5);
  CHECK(names_in(dir.path) == std::vector<std::string>{"t.json"});
  CHECK_THROWS(ulysses::reports::write_chrome_trace(dir / "no/t.json", {p}));
}
