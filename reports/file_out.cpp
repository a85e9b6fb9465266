#include "reports/file_out.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace ulysses::reports {

void write_file_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  auto fail = [&](const char* what) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot write '" + path + "': " + what + ": " + why);
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) fail("open");
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = errno;
      ::close(fd);
      errno = e;
      fail("write");
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const int e = errno;
    ::close(fd);
    errno = e;
    fail("fsync");
  }
  if (::close(fd) != 0) fail("close");
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail("rename");
}

}  // namespace ulysses::reports
