#include "runtime/cuda/cluster.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "runtime/cuda/bootstrap.hpp"
#include "runtime/cuda/cuda_check.hpp"
#include "core/errors.hpp"

namespace ulysses::runtime::cuda {
namespace {

using Clock = std::chrono::steady_clock;

std::string secs(double s) { return std::to_string(static_cast<int>(s + 0.5)) + " s"; }

// Polls a non-blocking communicator until its pending operation finished.
void poll_comm(ncclComm_t comm, Clock::time_point deadline, const std::string& what, int rank, double timeout_s) {
  const auto spin_until = Clock::now() + std::chrono::milliseconds(20);  // busy first: a group end is often microseconds
  while (true) {
    ncclResult_t st = ncclSuccess;
    NCCL_CHECK(ncclCommGetAsyncError(comm, &st));
    if (st == ncclSuccess) return;
    if (st != ncclInProgress) {
      ncclCommAbort(comm);
      throw std::runtime_error("rank " + std::to_string(rank) + ": NCCL error during " + what + ": " + ncclGetErrorString(st));
    }
    if (Clock::now() > deadline) {
      ncclCommAbort(comm);
      throw std::runtime_error("rank " + std::to_string(rank) + ": watchdog: " + what + " did not complete within " +
                               secs(timeout_s) + " (a rank is missing or stuck); communicator aborted");
    }
    if (Clock::now() < spin_until) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

// Blocking communicators for the run, in both process modes (launcher mode: bootstrapped
// non-blocking so a missing rank hits the watchdog, then ncclCommSplit into a blocking child).
// Measured on 2x H200 (2026-11-30, torchrun --nproc_per_node 2): with the non-blocking
// communicator every exchange paid ~5 ms of ncclInProgress polling (S=32K a2a.qkv.fwd 6271 us);
// with the blocking child 501 us, as in single-process mode (513 us).
// ULYSSES_NCCL_BLOCKING=0 keeps the non-blocking communicator (for debugging the watchdog).
bool blocking_wanted(bool /*launched*/) {
  const char* s = std::getenv("ULYSSES_NCCL_BLOCKING");
  return !(s && std::string(s) == "0");
}

}  // namespace

// All-gather among the rank threads of one process: the last thread to arrive publishes.
struct HostBoard {
  explicit HostBoard(int n) : slots(n) {}
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> slots, result;
  int arrived = 0;
  std::uint64_t generation = 0;
};

std::vector<std::string> RankCtx::allgather(const std::string& mine) {
  if (world == 1) return {mine};
  if (!board) return allgather_strings(*this, mine);
  std::unique_lock lock(board->mu);
  board->slots[rank] = mine;
  const std::uint64_t gen = board->generation;
  if (++board->arrived == world) {
    board->result = board->slots;
    board->arrived = 0;
    ++board->generation;
    board->cv.notify_all();
    return board->result;
  }
  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<std::int64_t>(timeout_s * 1000));
  while (board->generation == gen) {
    board->cv.wait_for(lock, std::chrono::milliseconds(20));
    if (board->generation != gen) break;
    if (abort_flag && abort_flag->load())
      throw std::runtime_error("rank " + std::to_string(rank) + ": aborted in a host all-gather (another rank failed)");
    if (Clock::now() > deadline)
      throw std::runtime_error("rank " + std::to_string(rank) + ": watchdog: a host all-gather did not complete within " +
                               secs(timeout_s) + " (a rank thread is stuck)");
  }
  return board->result;
}

void RankCtx::abort_comm() {
  if (comm && comm_aborted && !*comm_aborted) {
    *comm_aborted = true;
    ncclCommAbort(comm);
  }
}

void RankCtx::wait(cudaStream_t s, const std::string& what) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<std::int64_t>(timeout_s * 1000));
  int spins = 0;
  while (true) {
    const cudaError_t q = cudaStreamQuery(s);
    if (q == cudaSuccess) return;
    if (p2p_timeout && *p2p_timeout)  // the p2p kernel gave up waiting for a rank (and trapped): say which
      throw std::runtime_error("rank " + std::to_string(rank) + ": p2p exchange: rank " + std::to_string(*p2p_timeout - 1) +
                               " did not arrive within " + secs(timeout_s) + " (missing or stuck rank) while waiting for " + what);
    if (q != cudaErrorNotReady)
      throw std::runtime_error("rank " + std::to_string(rank) + ": CUDA error while waiting for " + what + ": " +
                               cudaGetErrorString(q));
    if (comm) {
      ncclResult_t st = ncclSuccess;
      ncclCommGetAsyncError(comm, &st);
      if (st != ncclSuccess && st != ncclInProgress) {
        abort_comm();
        throw std::runtime_error("rank " + std::to_string(rank) + ": NCCL error while waiting for " + what + ": " +
                                 ncclGetErrorString(st));
      }
    }
    if (abort_flag && abort_flag->load()) {
      abort_comm();
      throw std::runtime_error("rank " + std::to_string(rank) + ": aborted while waiting for " + what + " (another rank failed)");
    }
    if (Clock::now() > deadline) {
      abort_comm();
      throw std::runtime_error("rank " + std::to_string(rank) + ": watchdog: " + what + " did not finish within " + secs(timeout_s) +
                               " (stuck collective or missing rank); communicator aborted");
    }
    if (++spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void RankCtx::group_end(const std::string& what) { nccl(ncclGroupEnd(), what); }

void RankCtx::nccl(ncclResult_t r, const std::string& what) {
  if (r == ncclInProgress && comm) {
    try {
      poll_comm(comm, Clock::now() + std::chrono::milliseconds(static_cast<std::int64_t>(timeout_s * 1000)), what, rank, timeout_s);
    } catch (...) {
      if (comm_aborted) *comm_aborted = true;  // poll_comm aborted it
      throw;
    }
    return;
  }
  if (r != ncclSuccess && r != ncclInProgress) {
    abort_comm();
    throw std::runtime_error("rank " + std::to_string(rank) + ": NCCL error in " + what + ": " + ncclGetErrorString(r));
  }
}

std::shared_ptr<Cluster> Cluster::acquire(int P, double timeout_s) {
  static std::mutex mu;
  static std::map<int, std::shared_ptr<Cluster>> cache;
  std::lock_guard lock(mu);
  auto it = cache.find(P);
  if (it != cache.end() && !it->second->broken_) {
    it->second->timeout_s = timeout_s;
    for (auto& r : it->second->ranks_) r.timeout_s = timeout_s;
    return it->second;
  }
  std::shared_ptr<Cluster> c(new Cluster);
  c->timeout_s = timeout_s;
  c->init(P);
  if (P > 1) c->connect_all();
  cache[P] = c;
  return c;
}

void Cluster::init(int P) {
  launch_ = detect_launch();
  int n_dev = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&n_dev); e != cudaSuccess || n_dev == 0)
    throw std::runtime_error(std::string("no usable CUDA device on this machine (cudaGetDeviceCount: ") +
                             (e == cudaSuccess ? "0 devices" : cudaGetErrorString(e)) +
                             "); the cuda backend needs a GPU - use --backend cpu here");
  if (launch_.launched && launch_.world != P)
    throw core::InputError("", "sp_size", "is " + std::to_string(P) + " but " + launch_.launcher + " started WORLD_SIZE=" +
                                        std::to_string(launch_.world) + " processes (they must be equal)");
  if (launch_.launched && P > 1) {
    if (launch_.world != P)
      throw core::InputError("", "sp_size", "is " + std::to_string(P) + " but " + launch_.launcher + " started WORLD_SIZE=" +
                                          std::to_string(launch_.world) + " processes (they must be equal)");
    world_ = P;
    const int dev = launch_.local_rank % n_dev;
    devices_ = {dev};
  } else {
    if (P > n_dev)
      throw core::InputError("", "sp_size", "is " + std::to_string(P) + " but this process sees " + std::to_string(n_dev) +
                                          " GPU(s) (single-process mode drives one GPU per rank; use a launcher for more nodes)");
    world_ = P;
    for (int d = 0; d < P; ++d) devices_.push_back(launch_.launched ? (launch_.local_rank + d) % n_dev : d);
  }
  const int local = static_cast<int>(devices_.size());
  ranks_.resize(local);
  if (local > 1) board_ = std::make_unique<HostBoard>(local);
  aborted_.assign(local, 0);
  std::vector<ncclComm_t> comms(local, nullptr);
  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<std::int64_t>(timeout_s * 1000));
  const bool blocking = blocking_wanted(launch_.launched);
  ncclConfig_t nb = NCCL_CONFIG_INITIALIZER;
  nb.blocking = 0;
  if (P > 1 && !launch_.launched && blocking) {
    NCCL_CHECK(ncclCommInitAll(comms.data(), P, devices_.data()));  // all ranks are threads here: nothing can be missing
  } else if (P > 1 && !launch_.launched) {
    // the non-blocking equivalent of ncclCommInitAll: one id, every GPU's rank in one group
    ncclUniqueId id;
    NCCL_CHECK(ncclGetUniqueId(&id));
    NCCL_CHECK(ncclGroupStart());
    for (int i = 0; i < local; ++i) {
      CUDA_CHECK(cudaSetDevice(devices_[i]));
      NCCL_CHECK(ncclCommInitRankConfig(&comms[i], P, id, i, &nb));
    }
    NCCL_CHECK(ncclGroupEnd());
    for (int i = 0; i < local; ++i) poll_comm(comms[i], deadline, "ncclCommInitRankConfig", i, timeout_s);
  } else if (P > 1) {
    ncclUniqueId id;
    if (launch_.nccl_comm_id) NCCL_CHECK(ncclGetUniqueId(&id));
    else id = exchange_unique_id(launch_.rank, P, launch_.master_addr, launch_.bootstrap_port, timeout_s);
    CUDA_CHECK(cudaSetDevice(devices_[0]));
    NCCL_CHECK(ncclCommInitRankConfig(&comms[0], P, id, launch_.rank, &nb));
    poll_comm(comms[0], deadline, "ncclCommInitRankConfig", launch_.rank, timeout_s);
    if (blocking) {
      // every rank is known alive now: derive a blocking communicator (no ncclInProgress polling
      // on the hot path); the non-blocking parent stays for the life of the process
      ncclConfig_t bc = NCCL_CONFIG_INITIALIZER;
      bc.blocking = 1;
      ncclComm_t child = nullptr;
      NCCL_CHECK(ncclCommSplit(comms[0], 0, launch_.rank, &child, &bc));
      poll_comm(comms[0], deadline, "ncclCommSplit", launch_.rank, timeout_s);  // the parent is non-blocking
      if (!child) throw std::runtime_error("rank " + std::to_string(launch_.rank) + ": ncclCommSplit returned no communicator");
      poll_comm(child, deadline, "ncclCommSplit (child)", launch_.rank, timeout_s);
      comms[0] = child;
    }
  }
  for (int i = 0; i < local; ++i) {
    RankCtx& r = ranks_[i];
    r.rank = launch_.launched && P > 1 ? launch_.rank : i;
    r.world = P;
    r.device = devices_[i];
    r.comm = comms[i];
    r.timeout_s = timeout_s;
    r.abort_flag = &abort_;
    r.comm_aborted = reinterpret_cast<bool*>(&aborted_[i]);
    r.board = board_.get();
    CUDA_CHECK(cudaSetDevice(r.device));
    CUDA_CHECK(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&r.comm_stream, cudaStreamNonBlocking));
  }
}

void Cluster::connect_all() {
  // One small send/recv with every peer and one all-reduce, so that NCCL sets its connections up
  // now, while every rank is known to be alive (a blocking communicator connects lazily, on the host).
  run([](RankCtx& ctx) {
    void* buf = nullptr;
    CUDA_CHECK(cudaMalloc(&buf, 2 * 4096 * ctx.world));
    NCCL_CHECK(ncclGroupStart());
    for (int c = 0; c < ctx.world; ++c) {
      NCCL_CHECK(ncclSend(static_cast<char*>(buf) + 4096 * c, 2048, ncclBfloat16, c, ctx.comm, ctx.comm_stream));
      NCCL_CHECK(ncclRecv(static_cast<char*>(buf) + 4096 * (ctx.world + c), 2048, ncclBfloat16, c, ctx.comm, ctx.comm_stream));
    }
    ctx.group_end("connection warm-up");
    ctx.nccl(ncclAllReduce(buf, buf, 16, ncclFloat32, ncclSum, ctx.comm, ctx.comm_stream), "warm-up all-reduce");
    ctx.wait(ctx.comm_stream, "connection warm-up");
    cudaFree(buf);
    return std::string();
  });
}

Cluster::~Cluster() {
  // Communicators and streams are left to process exit: destroying them from a static
  // destructor can race the CUDA runtime's own teardown.
}

std::string Cluster::describe() const {
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, devices_.empty() ? 0 : devices_[0]);
  std::string mode = launch_.launched && world_ > 1
                         ? launch_.launcher + ", one process per GPU"
                         : "single process, " + std::to_string(world_) + " thread(s)";
  int nccl = 0;
  ncclGetVersion(&nccl);
  return std::to_string(world_) + "x " + prop.name + " (" + mode + ", NCCL " + std::to_string(nccl / 10000) + "." +
         std::to_string(nccl / 100 % 100) + ")";
}

std::vector<std::string> allgather_strings(RankCtx& ctx, const std::string& mine) {
  if (ctx.world == 1 || !ctx.comm) return {mine};
  CUDA_CHECK(cudaSetDevice(ctx.device));
  const int P = ctx.world;
  std::int64_t* lens_d = nullptr;
  CUDA_CHECK(cudaMalloc(&lens_d, sizeof(std::int64_t) * P));
  const std::int64_t my_len = static_cast<std::int64_t>(mine.size());
  CUDA_CHECK(cudaMemcpy(lens_d + ctx.rank, &my_len, sizeof my_len, cudaMemcpyHostToDevice));
  ctx.nccl(ncclAllGather(lens_d + ctx.rank, lens_d, 1, ncclInt64, ctx.comm, ctx.comm_stream), "all-gather of result sizes");
  ctx.wait(ctx.comm_stream, "all-gather of result sizes");
  std::vector<std::int64_t> lens(P);
  CUDA_CHECK(cudaMemcpy(lens.data(), lens_d, sizeof(std::int64_t) * P, cudaMemcpyDeviceToHost));
  cudaFree(lens_d);
  std::int64_t max_len = 1;
  for (auto l : lens) max_len = std::max(max_len, l);
  char* buf_d = nullptr;
  CUDA_CHECK(cudaMalloc(&buf_d, static_cast<std::size_t>(max_len * P)));
  CUDA_CHECK(cudaMemcpy(buf_d + ctx.rank * max_len, mine.data(), mine.size(), cudaMemcpyHostToDevice));
  ctx.nccl(ncclAllGather(buf_d + ctx.rank * max_len, buf_d, static_cast<std::size_t>(max_len), ncclChar, ctx.comm, ctx.comm_stream),
           "all-gather of results");
  ctx.wait(ctx.comm_stream, "all-gather of results");
  std::vector<char> host(static_cast<std::size_t>(max_len * P));
  CUDA_CHECK(cudaMemcpy(host.data(), buf_d, host.size(), cudaMemcpyDeviceToHost));
  cudaFree(buf_d);
  std::vector<std::string> out(P);
  for (int r = 0; r < P; ++r) out[r].assign(host.data() + r * max_len, static_cast<std::size_t>(lens[r]));
  return out;
}

std::vector<std::string> Cluster::run(const std::function<std::string(RankCtx&)>& fn) {
  if (broken_) throw std::runtime_error("the communicators of this cluster were aborted by an earlier failure");
  abort_ = false;
  const int local = static_cast<int>(ranks_.size());
  if (launch_.launched && world_ > 1) {
    RankCtx& ctx = ranks_[0];
    CUDA_CHECK(cudaSetDevice(ctx.device));
    std::string mine;
    try {
      mine = "0" + fn(ctx);
    } catch (const std::exception& e) {
      if (aborted_[0]) {
        broken_ = true;
        throw;
      }
      mine = std::string("1rank ") + std::to_string(ctx.rank) + ": " + e.what();  // tell the others, then fail together
    }
    std::vector<std::string> all;
    try {
      all = allgather_strings(ctx, mine);
    } catch (...) {
      broken_ = true;
      throw;
    }
    for (auto& s : all)
      if (!s.empty() && s[0] == '1') throw std::runtime_error(s.substr(1));
    for (auto& s : all) s.erase(0, 1);
    return all;
  }
  std::vector<std::string> out(world_);
  std::vector<std::exception_ptr> errs(local);
  std::vector<std::thread> th;
  for (int i = 0; i < local; ++i)
    th.emplace_back([&, i] {
      try {
        CUDA_CHECK(cudaSetDevice(ranks_[i].device));
        out[ranks_[i].rank] = fn(ranks_[i]);
      } catch (...) {
        errs[i] = std::current_exception();
        abort_ = true;
      }
    });
  for (auto& t : th) t.join();
  // Report the first failure that is not the consequence of another rank's.
  std::exception_ptr first;
  for (auto& e : errs) {
    if (!e) continue;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      if (!first || std::string(ex.what()).find("another rank failed") == std::string::npos) {
        if (!first || std::string(ex.what()).find("another rank failed") == std::string::npos) first = e;
      }
    }
  }
  for (auto a : aborted_)
    if (a) broken_ = true;
  if (first) {
    if (!broken_ && world_ > 1) {
      // a rank failed outside a collective: its peers may have NCCL work pending; abort all
      for (auto& r : ranks_) r.abort_comm();
      broken_ = true;
    }
    std::rethrow_exception(first);
  }
  return out;
}

}  // namespace ulysses::runtime::cuda
