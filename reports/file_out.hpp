#pragma once
// Writing output files so that a failed or interrupted run leaves nothing that looks whole: the
// text goes to a temporary file next to the final path (same folder, so the rename stays on one
// file system; a unique name, pid + random, so concurrent runs never share one), every write is
// checked, the file is flushed and fsync'ed, and only then renamed over the final path. Also: a
// non-blocking lock file per output name, the stdout check, and a SIGINT/SIGTERM stop flag.
#include <atomic>
#include <signal.h>
#include <string>
#include <string_view>

namespace ulysses::reports {

// Throws std::runtime_error "cannot write '<path>': <what>: <reason>" (the temporary file removed).
void write_file_atomic(const std::string& path, const std::string& text);

// Fails fast (before a long run) when `path` could not be written: creates and removes a
// temporary beside it; never creates or truncates `path` itself (an empty file under the final
// name would look like a result). Throws as AtomicFile does.
void check_can_write(const std::string& path);

// A temporary file "<path>.tmp.<pid>.<random>" written in pieces. finish() flushes, fsyncs and
// closes it; commit() then renames it to `path` (and fsyncs the folder). An AtomicFile destroyed
// before commit() (an error, an exception, an interrupt) removes its temporary: the final path
// keeps what it held before, or stays absent. Errors throw std::runtime_error naming `path`.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(std::string_view text);  // buffered; a failed write throws at once or at finish()
  void finish();                      // flush + fsync + close; idempotent
  void commit();                      // finish() if needed, then rename to path()
  void discard() noexcept;            // remove the temporary now
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return tmp_; }
  bool committed() const { return committed_; }

 private:
  void flush_buffer();
  [[noreturn]] void fail(const char* what, int err);

  std::string path_, tmp_, buf_;
  int fd_ = -1;
  bool finished_ = false, committed_ = false;
};

// An exclusive lock on "<path>" (created if absent, never removed: removing a lock file that
// another process has open would let a third run lock a fresh one beside it). Non-blocking: a
// second holder fails at once with std::runtime_error "'<path>' is locked by another run ...".
class LockFile {
 public:
  explicit LockFile(std::string path);
  ~LockFile();
  LockFile(const LockFile&) = delete;
  LockFile& operator=(const LockFile&) = delete;

 private:
  std::string path_;
  int fd_ = -1;
};

// Flushes std::cout and stdout; throws std::runtime_error "cannot write standard output: ..."
// when anything written to them was lost (e.g. `> /dev/full`).
void check_stdout();

// While alive, SIGINT and SIGTERM set a flag instead of killing the process (a second one of
// the same kind kills as usual); the run polls stop_signal() and winds down, removing its
// temporaries. The previous handlers come back on destruction.
class StopOnSignals {
 public:
  StopOnSignals();
  ~StopOnSignals();
  StopOnSignals(const StopOnSignals&) = delete;
  StopOnSignals& operator=(const StopOnSignals&) = delete;
  static const std::atomic<int>& flag();  // 0, or the signal number received
  static int stop_signal() { return flag().load(); }

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

// The one line and the exit code (128 + signal) of a run stopped by a signal.
int exit_code_of_signal(int sig);
std::string signal_name(int sig);

}  // namespace ulysses::reports
