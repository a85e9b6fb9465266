#pragma once
// Ranks as threads of one process (the CPU backend's ranks, the CUDA runtime's logical ranks on one GPU):
// the barrier they meet at, which a failing rank can release with an error instead of leaving its peers waiting.
#include <atomic>
#include <stdexcept>

namespace ulysses::runtime {

// A barrier whose waiters can be released with an error: abort() (called by a rank that failed)
// makes every rank waiting in, or later arriving at, the barrier throw PeerFailed instead of
// waiting forever. Waiting is std::atomic::wait (a short spin, then a futex), as std::barrier.
struct PeerFailed : std::runtime_error {
  PeerFailed() : std::runtime_error("a peer rank failed") {}
};

class AbortableBarrier {
 public:
  explicit AbortableBarrier(int n) : n_(n) {}
  void arrive_and_wait() {
    const unsigned gen = gen_.load();
    if (count_.fetch_add(1) + 1 == n_) {
      count_.store(0);  // reset before the release: the next round starts clean
      gen_.fetch_add(1);
      gen_.notify_all();
    } else {
      while (gen_.load() == gen) {
        if (aborted_.load()) throw PeerFailed();
        gen_.wait(gen);
      }
    }
    if (aborted_.load()) throw PeerFailed();
  }
  void abort() {
    aborted_.store(true);
    gen_.fetch_add(1);
    gen_.notify_all();
  }

 private:
  const int n_;
  std::atomic<int> count_{0};
  std::atomic<unsigned> gen_{0};
  std::atomic<bool> aborted_{false};
};

}  // namespace ulysses::runtime
