// Nothing is lost (issue 17), through the built binary: a full disk, SIGINT/SIGTERM mid-sweep, two
// sweeps into one folder, sweep names used as paths, stdout on a full device, and hostile `report`
// JSON (missing keys, wrong types, deep nesting) all end in one line and a known exit code, never
// a crash, and leave no file that looks complete.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "sim/sweep.hpp"
#include "tests/cli/run_cli.hpp"

namespace fs = std::filesystem;
using ulysses::test::count_lines;
using ulysses::test::run_cli;
using ulysses::test::slurp;
using ulysses::test::source_path;
using ulysses::test::TempDir;

namespace {

void put(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

bool has_temporary(const fs::path& dir) {
  for (const auto& n : names_in(dir))
    if (n.find(".tmp.") != std::string::npos) return true;
  return false;
}

// A sweep spec in `dir`: `lengths` x `batches` points of llama-3.1-8b on 8 H100 (mode predict).
std::string write_spec(const TempDir& dir, const std::string& name, int lengths, int batches,
                       const std::string& mode = "predict", const std::string& extra_axes = "") {
  const std::string path = dir / (name + ".yaml");
  std::ofstream f(path);
  f << "name: " << name << "\nbase: " << source_path("scenarios/llama8b-h100-sp8.yaml") << "\naxes:\n  plan.seq_len: [";
  for (int i = 1; i <= lengths; ++i) f << (i > 1 ? ", " : "") << 8192 * i;
  f << "]\n  plan.micro_batch_size: [";
  for (int i = 1; i <= batches; ++i) f << (i > 1 ? ", " : "") << i;
  f << "]\n" << extra_axes << "mode: " << mode << "\n";
  return path;
}

// Runs the binary with the file size limited to `blocks` (512-byte blocks in dash, 1024 in bash:
// either way far below the outputs), SIGXFSZ ignored: writes then fail as on a full disk.
ulysses::test::CliResult run_cli_small_disk(const std::string& args, int blocks, const TempDir& io) {
  const std::string out = io / "limited.stdout", err = io / "limited.stderr";
  const std::string cmd = "(trap '' XFSZ; ulimit -f " + std::to_string(blocks) + "; exec '" + ULYSSES_BIN + "' " + args +
                          ") >'" + out + "' 2>'" + err + "'";
  const int status = std::system(cmd.c_str());
  ulysses::test::CliResult r;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

// fork/exec of the binary with default SIGINT/SIGTERM dispositions, output to files.
pid_t spawn(const std::vector<std::string>& args, const std::string& out, const std::string& err) {
  std::vector<std::string> all{ULYSSES_BIN};
  all.insert(all.end(), args.begin(), args.end());
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (o < 0 || e < 0) ::_exit(126);
    ::dup2(o, STDOUT_FILENO);
    ::dup2(e, STDERR_FILENO);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

// Waits up to `seconds`; the wait status, or -1 (the child is then killed).
int wait_for(pid_t pid, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int status = 0;
  while (std::chrono::steady_clock::now() < end) {
    if (::waitpid(pid, &status, WNOHANG) == pid) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return -1;
}

}  // namespace

TEST_CASE("a full disk during a sweep: exit 1, one line naming the CSV, the old outputs untouched", "[cli][hostile]") {
  TempDir dir;
  const std::string spec = write_spec(dir, "full", 40, 25);  // 1000 points, ~300 KB of CSV
  const std::string out = dir / "out";
  fs::create_directories(out);
  put(out + "/full.csv", "old csv\n");
  put(out + "/full.summary.json", "{\"old\": true}\n");
  const auto r = run_cli_small_disk("sweep '" + spec + "' --out '" + out + "' --threads 2", 16, dir);
  INFO(r.err);
  CHECK(r.rc == 1);
  CHECK(count_lines(r.err) == 1);
  CHECK(r.err.find(out + "/full.csv") != std::string::npos);
  CHECK(slurp(out + "/full.csv") == "old csv\n");
  CHECK(slurp(out + "/full.summary.json") == "{\"old\": true}\n");
  CHECK(!has_temporary(out));
}

TEST_CASE("a full disk during report: exit 1, one line, no summary.md left", "[cli][hostile]") {
  TempDir dir;
  const auto plan = run_cli("plan --model llama-3.1-8b --gpus 8 --all-features --format json");
  REQUIRE(plan.rc == 0);
  put(dir / "plan.json", plan.out);
  const std::string out = dir / "report";
  fs::create_directories(out);
  put(out + "/summary.md", "# an older report\n");
  const auto r = run_cli_small_disk("report '" + (dir / "plan.json") + "' --out '" + out + "' --no-plots", 2, dir);
  INFO(r.err);
  CHECK(r.rc == 1);
  CHECK(count_lines(r.err) == 1);
  CHECK(r.err.find("report_data.json") != std::string::npos);
  CHECK(!fs::exists(out + "/summary.md"));
  CHECK(!fs::exists(out + "/report_data.json"));
  CHECK(!has_temporary(out));
}

TEST_CASE("stdout on a full device: plan, predict and sweep exit 1 with one line", "[cli][hostile]") {
  TempDir dir;
  const std::string spec = write_spec(dir, "tiny", 2, 2);
  for (const std::string& args : std::vector<std::string>{"plan --model llama-3.1-8b --gpus 8 --format json",
                                 "predict --model llama-3.1-8b --gpus 8 --sp-size 8 --seq-len 65536 --format json",
                                 "plan --model llama-3.1-8b --gpus 8",
                                 "sweep '" + spec + "' --out '" + (dir / "out") + "' --format json"}) {
    const std::string err = dir / "err";
    std::string cmd = "'";
    cmd += ULYSSES_BIN;
    cmd += "' " + args + " >/dev/full 2>'" + err + "'";
    const int status = std::system(cmd.c_str());
    const std::string text = slurp(err);
    INFO(args << "\n" << text);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 1);
    CHECK(count_lines(text) == 1);
    CHECK(text.find("standard output") != std::string::npos);
  }
}

TEST_CASE("SIGINT and SIGTERM mid-sweep: exit 128+signal, one line, no cut CSV, old outputs untouched", "[cli][hostile]") {
  for (const int sig : {SIGINT, SIGTERM}) {
    TempDir dir;
    // 2.56 million capacity searches: about a minute on two cores (~50000 points/s per core)
    const std::string spec = write_spec(dir, "big", 400, 400, "plan",
                                        "  plan.zero_stage: [0, 1, 2, 3]\n"
                                        "  plan.attn_implementation: [flash_attention_2, flash_attention_3, sdpa, eager]\n");
    const std::string out = dir / "out";
    fs::create_directories(out);
    put(out + "/big.csv", "old csv\n");
    put(out + "/big.summary.json", "{\"old\": true}\n");
    const pid_t pid = spawn({"sweep", spec, "--out", out, "--threads", "2"}, dir / "stdout", dir / "stderr");
    REQUIRE(pid > 0);
    // Started writing: a temporary appears (or, without atomic output, the CSV changes).
    bool writing = false;
    for (int i = 0; i < 3000 && !writing; ++i) {
      writing = has_temporary(out) || slurp(out + "/big.csv") != "old csv\n";
      if (!writing) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    CHECK(writing);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ::kill(pid, sig);
    const int status = wait_for(pid, 30);
    const std::string err = slurp(dir / "stderr");
    INFO("signal " << sig << "\n" << err);
    REQUIRE(status != -1);
    CHECK(WIFEXITED(status));
    CHECK((WIFEXITED(status) ? WEXITSTATUS(status) : -1) == 128 + sig);
    CHECK(count_lines(err) == 1);
    CHECK(err.find("interrupted") != std::string::npos);
    CHECK(slurp(out + "/big.csv") == "old csv\n");
    CHECK(slurp(out + "/big.summary.json") == "{\"old\": true}\n");
    CHECK(!has_temporary(out));
  }
}

TEST_CASE("a second sweep into the same folder and name fails at once naming the lock", "[cli][hostile]") {
  TempDir dir;
  const std::string spec = write_spec(dir, "tiny", 2, 2);
  const std::string out = dir / "out";
  fs::create_directories(out);
  const std::string lock = out + "/tiny.lock";
  const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT, 0644);  // another run holding it
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);
  const auto r = run_cli("sweep '" + spec + "' --out '" + out + "'");
  ::close(fd);
  INFO(r.err);
  CHECK(r.rc == 1);
  CHECK(count_lines(r.err) == 1);
  CHECK(r.err.find(lock) != std::string::npos);
  CHECK(!fs::exists(out + "/tiny.csv"));
  // released: the same run now succeeds and leaves the CSV, the summary and the lock only
  const auto ok = run_cli("sweep '" + spec + "' --out '" + out + "'");
  INFO(ok.err);
  CHECK(ok.rc == 0);
  CHECK(names_in(out) == std::vector<std::string>{"tiny.csv", "tiny.lock", "tiny.summary.json"});
}

TEST_CASE("a sweep name that is not a plain file name: exit 2, one line naming the spec and key name", "[cli][hostile]") {
  TempDir dir;
  const std::string out = dir / "sub/out";
  for (const std::string& name : std::vector<std::string>{"../escape", dir / "abs-escape", ".hidden", "a b", "x/y", std::string(200, 'n'), "\"\""}) {
    const std::string spec = dir / "s.yaml";
    put(spec, "name: " + name + "\nbase: " + source_path("scenarios/llama8b-h100-sp8.yaml") +
                  "\naxes:\n  plan.sp_size: [1, 8]\n");
    const auto r = run_cli("sweep '" + spec + "' --out '" + out + "'");
    INFO(name << "\n" << r.err);
    CHECK(r.rc == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.find(spec + ": name: ") != std::string::npos);
  }
  CHECK(!fs::exists(dir / "sub/escape.csv"));
  CHECK(!fs::exists(dir / "abs-escape.csv"));
  CHECK(names_in(dir.path) == std::vector<std::string>{"s.yaml"});  // checked before --out is even created
}

TEST_CASE("report on hostile JSON: one line 'file: key: rule', exit 2, never a crash", "[cli][hostile]") {
  TempDir dir;
  const auto plan = run_cli("plan --model llama-3.1-8b --gpus 8 --format json");
  REQUIRE(plan.rc == 0);
  const std::string good = plan.out;
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const auto at = s.find(from);
    REQUIRE(at != std::string::npos);
    return s.replace(at, from.size(), to);
  };
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  struct Case {
    std::string file, text, expect;
  };
  const std::vector<Case> cases = {
      {"missing.json", "{\"command\": \"plan\"}", "missing.json: scenario: missing required key"},
      {"csv_type.json", "{\"points\": 3, \"csv\": 5}", "csv_type.json: name: missing required key"},
      {"csv_type2.json", "{\"name\": \"s\", \"mode\": \"predict\", \"points\": 3, \"valid\": 3, \"skipped_total\": 0, "
                         "\"threads\": 1, \"points_per_s\": 1, \"csv\": 5}",
       "csv_type2.json: csv: must be text"},
      {"seq_type.json", replace("\"seq_len\":", "\"seq_len\": \"many\", \"was\":"), "seq_type.json: seq_len: must be an integer"},
      {"deep.json", deep, "deep.json: file: JSON nested deeper than"},
      {"deep_key.json", replace("{", "{\"x\": " + deep + ","), "deep_key.json: file: JSON nested deeper than"},
      {"label.json", replace("{", "{\"label\": [1],"), "label.json: label: must be text"},
  };
  for (const auto& c : cases) {
    put(dir / c.file, c.text);
    const auto r = run_cli("report '" + (dir / c.file) + "' --out '" + (dir / "out") + "' --no-plots");
    INFO(c.file << "\n" << r.err.substr(0, 400));
    CHECK(r.rc == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.find(dir / c.expect) != std::string::npos);
  }
  put(dir / "good.json", good);  // and the untouched result still renders
  const auto r = run_cli("report '" + (dir / "good.json") + "' --out '" + (dir / "out") + "' --no-plots");
  INFO(r.err);
  CHECK(r.rc == 0);
  CHECK(fs::exists(dir / "out/summary.md"));
}

TEST_CASE("run_sweep stops on its flag: SweepStopped, no row handed on after it", "[cli][hostile]") {
  TempDir dir;
  const ulysses::SweepSpec spec = ulysses::load_sweep(write_spec(dir, "stop", 40, 40));  // 1600 points
  std::atomic<int> stop{0};
  int sinks = 0;
  ulysses::SweepOptions opt;
  opt.threads = 2;
  opt.chunk = 16;
  opt.row = [](const ulysses::SweepPoint&, std::string& out) { out += "r\n"; };
  opt.sink = [&](const std::string&) {
    ++sinks;
    if (sinks == 3) stop = SIGINT;  // as the signal handler does, mid-run
  };
  opt.stop = &stop;
  try {
    (void)ulysses::run_sweep(spec, opt);
    FAIL("no SweepStopped");
  } catch (const ulysses::SweepStopped& e) {
    CHECK(e.value == SIGINT);
  }
  CHECK(sinks == 3);
  stop = 0;  // and without the flag the same sweep runs to the end
  sinks = 0;
  opt.sink = [&](const std::string&) { ++sinks; };
  CHECK(ulysses::run_sweep(spec, opt).points == 1600);
  CHECK(sinks == 100);
}

TEST_CASE("sweep_name_rule: plain file names only", "[cli][hostile]") {
  for (const char* ok : {"sweep-main", "a", "x_1.v2", "A.B-c"}) CHECK(ulysses::sweep_name_rule(ok).empty());
  for (const std::string& bad : std::vector<std::string>{"", "../x", "/x", "x/y", ".x", "..", "a b", "a\nb", "a\\b", "\xc3\xa9", std::string(129, 'n')})
    CHECK(!ulysses::sweep_name_rule(bad).empty());
  CHECK(ulysses::sweep_name_rule(std::string(128, 'n')).empty());
}

TEST_CASE("SIGTERM mid-report: exit 143, one line, none of the run's files left", "[cli][hostile]") {
  const bool have_mpl = std::system("/usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1") == 0 ||
                        std::system("python3 -c 'import matplotlib' >/dev/null 2>&1") == 0;
  if (!have_mpl) {
    WARN("skipped: no python3 with matplotlib");
    return;
  }
  TempDir dir;
  const auto plan = run_cli("plan --model llama-3.1-8b --gpus 8 --all-features --format json");
  REQUIRE(plan.rc == 0);
  put(dir / "plan.json", plan.out);
  const std::string out = dir / "rep";
  const pid_t pid = spawn({"report", dir / "plan.json", "--out", out}, dir / "stdout", dir / "stderr");
  REQUIRE(pid > 0);
  // the data file comes first, then the plot script runs for about a second
  bool started = false;
  for (int i = 0; i < 3000 && !started; ++i) {
    started = fs::exists(out + "/report_data.json");
    if (!started) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  REQUIRE(started);
  ::kill(pid, SIGTERM);
  const int status = wait_for(pid, 60);
  const std::string err = slurp(dir / "stderr");
  INFO(err);
  REQUIRE(status != -1);
  REQUIRE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 0) {  // it finished before the signal: then whole
    WARN("the report finished before the signal");
    CHECK(fs::exists(out + "/summary.md"));
    return;
  }
  CHECK(WEXITSTATUS(status) == 128 + SIGTERM);
  CHECK(count_lines(err) == 1);
  CHECK(err.find("interrupted") != std::string::npos);
  CHECK(names_in(out).empty());
}
