#include "runtime/cuda/bootstrap.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

#include "runtime/cuda/cuda_check.hpp"

namespace ulysses::runtime::cuda {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::uint32_t kMagic = 0x554c5953;  // "ULYS"

struct Hello {
  std::uint32_t magic, rank, world;
};
struct Answer {
  std::uint32_t magic, status, len;  // status 0: len = sizeof(ncclUniqueId) bytes of id follow; else a message
};

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error("bootstrap: " + what); }

int ms_left(Clock::time_point deadline) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return ms > 0 ? static_cast<int>(ms) : 0;
}

struct Fd {
  int fd = -1;
  explicit Fd(int f = -1) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(Fd&& o) noexcept : fd(o.fd) { o.fd = -1; }
  Fd& operator=(Fd&& o) noexcept {
    std::swap(fd, o.fd);
    return *this;
  }
};

// Moves exactly n bytes or fails at the deadline.
void io_all(int fd, void* buf, std::size_t n, bool write, Clock::time_point deadline, const std::string& who) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    pollfd pfd{fd, static_cast<short>(write ? POLLOUT : POLLIN), 0};
    const int left = ms_left(deadline);
    if (left == 0 || ::poll(&pfd, 1, left) <= 0) fail("timed out talking to " + who);
    const ssize_t k = write ? ::send(fd, p, n, MSG_NOSIGNAL) : ::recv(fd, p, n, 0);
    if (k == 0) fail(who + " closed the connection");
    if (k < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      fail(std::string("socket error with ") + who + ": " + std::strerror(errno));
    }
    p += k, n -= static_cast<std::size_t>(k);
  }
}

void send_answer(int fd, std::uint32_t status, const void* data, std::uint32_t len, Clock::time_point deadline) {
  Answer a{kMagic, status, len};
  try {
    io_all(fd, &a, sizeof a, true, deadline, "a peer");
    io_all(fd, const_cast<void*>(data), len, true, deadline, "a peer");
  } catch (const std::exception&) {
    // the peer may be gone; rank 0 reports its own error anyway
  }
}

ncclUniqueId serve(int world, int port, Clock::time_point deadline, double timeout_s) {
  Fd srv(::socket(AF_INET, SOCK_STREAM, 0));
  if (srv.fd < 0) fail(std::string("socket: ") + std::strerror(errno));
  int one = 1;
  ::setsockopt(srv.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::bind(srv.fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    fail("rank 0 cannot listen on port " + std::to_string(port) + ": " + std::strerror(errno) +
         " (set ULYSSES_BOOTSTRAP_PORT or MASTER_PORT)");
  if (::listen(srv.fd, world) != 0) fail(std::string("listen: ") + std::strerror(errno));

  std::vector<Fd> peers;
  std::vector<bool> seen(world, false);
  seen[0] = true;
  std::string error;
  while (static_cast<int>(peers.size()) < world - 1 && error.empty()) {
    pollfd pfd{srv.fd, POLLIN, 0};
    const int left = ms_left(deadline);
    if (left == 0 || ::poll(&pfd, 1, left) <= 0) {
      std::string missing;
      for (int r = 1; r < world; ++r)
        if (!seen[r]) missing += (missing.empty() ? "" : ",") + std::to_string(r);
      error = "rank(s) " + missing + " of " + std::to_string(world) + " did not connect within " +
              std::to_string(static_cast<int>(timeout_s)) + " s";
      break;
    }
    Fd c(::accept(srv.fd, nullptr, nullptr));
    if (c.fd < 0) continue;
    Hello h{};
    try {
      io_all(c.fd, &h, sizeof h, false, deadline, "a connecting rank");
    } catch (const std::exception&) {
      continue;  // a stray connection
    }
    if (h.magic != kMagic) continue;
    if (static_cast<int>(h.world) != world)
      error = "rank " + std::to_string(h.rank) + " reports world size " + std::to_string(h.world) + ", rank 0 has " +
              std::to_string(world);
    else if (h.rank == 0 || static_cast<int>(h.rank) >= world || seen[h.rank])
      error = "rank " + std::to_string(h.rank) + " connected twice or is out of range";
    else
      seen[h.rank] = true;
    peers.push_back(std::move(c));
  }
  if (!error.empty()) {
    const std::string msg = "rank 0: " + error;
    for (auto& p : peers) send_answer(p.fd, 1, msg.data(), static_cast<std::uint32_t>(msg.size()), Clock::now() + std::chrono::seconds(2));
    fail(error);
  }
  ncclUniqueId id;
  NCCL_CHECK(ncclGetUniqueId(&id));
  for (auto& p : peers) send_answer(p.fd, 0, &id, sizeof id, deadline);
  return id;
}

ncclUniqueId fetch(int rank, int world, const std::string& addr, int port, Clock::time_point deadline, double timeout_s) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  const std::string who = "rank 0 at " + addr + ":" + std::to_string(port);
  if (::getaddrinfo(addr.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || !res)
    fail("cannot resolve MASTER_ADDR '" + addr + "'");
  Fd c;
  while (true) {
    c = Fd(::socket(AF_INET, SOCK_STREAM, 0));
    if (::connect(c.fd, res->ai_addr, res->ai_addrlen) == 0) break;
    if (ms_left(deadline) == 0) {
      ::freeaddrinfo(res);
      fail("rank " + std::to_string(rank) + " could not reach " + who + " within " + std::to_string(static_cast<int>(timeout_s)) +
           " s (is rank 0 running?)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ::freeaddrinfo(res);
  Hello h{kMagic, static_cast<std::uint32_t>(rank), static_cast<std::uint32_t>(world)};
  io_all(c.fd, &h, sizeof h, true, deadline, who);
  Answer a{};
  io_all(c.fd, &a, sizeof a, false, deadline, who + " (waiting for all ranks to connect)");
  if (a.magic != kMagic || a.len > 4096) fail("bad answer from " + who);
  std::vector<char> body(a.len);
  io_all(c.fd, body.data(), a.len, false, deadline, who);
  if (a.status != 0) fail(std::string(body.begin(), body.end()));
  if (a.len != sizeof(ncclUniqueId)) fail("bad id size from " + who);
  ncclUniqueId id;
  std::memcpy(&id, body.data(), sizeof id);
  return id;
}

}  // namespace

ncclUniqueId exchange_unique_id(int rank, int world, const std::string& addr, int port, double timeout_s) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<std::int64_t>(timeout_s * 1000));
  if (world == 1) {
    ncclUniqueId id;
    NCCL_CHECK(ncclGetUniqueId(&id));
    return id;
  }
  return rank == 0 ? serve(world, port, deadline, timeout_s) : fetch(rank, world, addr, port, deadline, timeout_s);
}

}  // namespace ulysses::runtime::cuda
