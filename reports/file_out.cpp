// Atomic output files (temporary + fsync + rename), lock files, the stdout check and the stop-on-
// signal flag: see reports/file_out.hpp.
#include "reports/file_out.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <random>
#include <stdexcept>

namespace ulysses::reports {

namespace {

constexpr std::size_t kBufferBytes = 1 << 20;

std::string folder_of(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string unique_temp_name(const std::string& path) {
  static thread_local std::mt19937_64 rng{std::random_device{}() ^ (static_cast<std::uint64_t>(::getpid()) << 32)};
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(rng()));
  return path + ".tmp." + std::to_string(::getpid()) + "." + hex;
}

// Makes the rename durable; a folder that cannot be opened or synced (some file systems) is not
// an error: the file's own data is already on disk.
void sync_folder(const std::string& path) {
  const int dfd = ::open(folder_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return;
  (void)::fsync(dfd);
  ::close(dfd);
}

std::atomic<int> g_stop{0};

extern "C" void on_stop_signal(int sig) {
  g_stop.store(sig);
  // A second signal of the same kind kills as usual (SA_RESETHAND restored the default).
}

}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0 && !S_ISREG(st.st_mode))  // a device, pipe or folder is never replaced
    throw std::runtime_error("cannot write '" + path_ + "': not a regular file");
  for (int attempt = 0; fd_ < 0; ++attempt) {
    tmp_ = unique_temp_name(path_);
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0 && (errno != EEXIST || attempt > 8)) {
      const int e = errno;
      tmp_.clear();  // nothing of ours to remove
      fail("open", e);
    }
  }
  buf_.reserve(kBufferBytes);
}

AtomicFile::~AtomicFile() {
  if (!committed_) discard();
}

void AtomicFile::fail(const char* what, int err) {
  discard();
  throw std::runtime_error("cannot write '" + path_ + "': " + what + ": " + std::strerror(err));
}

void AtomicFile::flush_buffer() {
  for (std::size_t done = 0; done < buf_.size();) {
    const ssize_t n = ::write(fd_, buf_.data() + done, buf_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("write", n < 0 ? errno : ENOSPC);
    done += static_cast<std::size_t>(n);
  }
  buf_.clear();
}

void AtomicFile::write(std::string_view text) {
  if (fd_ < 0 || finished_) throw std::logic_error("AtomicFile::write after finish or discard: " + path_);
  if (buf_.size() + text.size() > kBufferBytes) {
    flush_buffer();
    if (text.size() > kBufferBytes) {
      buf_.assign(text);
      flush_buffer();
      return;
    }
  }
  buf_.append(text);
}

void AtomicFile::finish() {
  if (finished_) return;
  if (fd_ < 0) throw std::logic_error("AtomicFile::finish after discard: " + path_);
  flush_buffer();
  if (::fsync(fd_) != 0) fail("fsync", errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("close", errno);
  finished_ = true;
}

void AtomicFile::commit() {
  if (committed_) return;
  finish();
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) fail("rename", errno);
  committed_ = true;
  sync_folder(path_);
}

void AtomicFile::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!tmp_.empty() && !committed_) ::unlink(tmp_.c_str());
  tmp_.clear();
  buf_.clear();
}

void write_file_atomic(const std::string& path, const std::string& text) {
  AtomicFile f(path);
  f.write(text);
  f.commit();
}

void check_can_write(const std::string& path) {
  AtomicFile probe(path);
  probe.discard();
}

LockFile::LockFile(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error("cannot create lock file '" + path_ + "': " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    ::close(fd_);
    fd_ = -1;
    if (e == EWOULDBLOCK)
      throw std::runtime_error("'" + path_ + "' is locked by another run writing the same outputs; wait for it or use another --out");
    throw std::runtime_error("cannot lock '" + path_ + "': " + std::strerror(e));
  }
}

LockFile::~LockFile() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

void check_stdout() {
  errno = 0;
  std::cout.flush();
  const int e_stream = errno;
  const bool stream_ok = static_cast<bool>(std::cout);
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  const int e = errno != 0 ? errno : e_stream;
  if (stream_ok && flushed && !std::ferror(stdout)) return;
  std::cout.clear();
  std::clearerr(stdout);
  throw std::runtime_error(std::string("cannot write standard output") + (e ? std::string(": ") + std::strerror(e) : ""));
}

StopOnSignals::StopOnSignals() {
  g_stop.store(0);
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND | SA_RESTART;
  ::sigaction(SIGINT, &sa, &old_int_);
  ::sigaction(SIGTERM, &sa, &old_term_);
  // A signal the caller ignores (a background job's SIGINT, nohup) stays ignored.
  if (old_int_.sa_handler == SIG_IGN) ::sigaction(SIGINT, &old_int_, nullptr);
  if (old_term_.sa_handler == SIG_IGN) ::sigaction(SIGTERM, &old_term_, nullptr);
}

StopOnSignals::~StopOnSignals() {
  ::sigaction(SIGINT, &old_int_, nullptr);
  ::sigaction(SIGTERM, &old_term_, nullptr);
}

const std::atomic<int>& StopOnSignals::flag() { return g_stop; }

int exit_code_of_signal(int sig) { return 128 + sig; }

std::string signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    default: return "signal " + std::to_string(sig);
  }
}

}  // namespace ulysses::reports
