#include "runtime/cuda/p2p.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

#include "runtime/cuda/cuda_check.hpp"
#include "core/errors.hpp"

namespace ulysses::runtime::cuda {
namespace {

std::string transport_wanted() {
  const char* e = std::getenv("ULYSSES_A2A_TRANSPORT");
  const std::string v = e ? e : "auto";
  if (v != "auto" && v != "nccl" && v != "p2p")
    throw core::InputError("ULYSSES_A2A_TRANSPORT", "ULYSSES_A2A_TRANSPORT", "is '" + v + "'; must be one of auto, nccl, p2p");
  return v;
}

std::string hex(const void* p, std::size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  const auto* b = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < n; ++i) s += d[b[i] >> 4], s += d[b[i] & 15];
  return s;
}

void unhex(const std::string& s, void* out, std::size_t n) {
  if (s.size() != 2 * n) throw std::runtime_error("p2p: malformed buffer record from a peer");
  auto v = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  auto* b = static_cast<unsigned char*>(out);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<unsigned char>(v(s[2 * i]) << 4 | v(s[2 * i + 1]));
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t a = 0;
  while (true) {
    const std::size_t b = s.find(sep, a);
    out.push_back(s.substr(a, b == std::string::npos ? std::string::npos : b - a));
    if (b == std::string::npos) return out;
    a = b + 1;
  }
}

}  // namespace

P2pTransport::P2pTransport(RankCtx& ctx) : ctx_(ctx) {
  launcher_ = ctx.board == nullptr;
  decide();
}

void P2pTransport::decide() {
  const std::string want = transport_wanted();
  CUDA_CHECK(cudaSetDevice(ctx_.device));
  if (ctx_.world < 2) {  // nothing to agree on
    why_not_ = "one rank";
    return;
  }
  const std::string why = want == "nccl"                       ? "ULYSSES_A2A_TRANSPORT=nccl"
                          : ctx_.world > kernels::kP2pMaxPeers ? "more than " + std::to_string(kernels::kP2pMaxPeers) + " ranks"
                                                               : "";
  // 1. what every rank can do: "ok|host|device|SMs" or "no|reason"
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  int sms = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx_.device));
  const auto all = ctx_.allgather(why.empty() ? "ok|" + std::string(host) + "|" + std::to_string(ctx_.device) + "|" + std::to_string(sms)
                                              : "no|" + why);
  int min_sms = 1 << 30;
  std::vector<int> devices(ctx_.world, 0);
  for (int c = 0; c < ctx_.world && why_not_.empty(); ++c) {
    const auto f = split(all[c], '|');
    if (f[0] != "ok") why_not_ = "rank " + std::to_string(c) + ": " + f[1];
    else if (launcher_ && f[1] != host) why_not_ = "ranks on more than one host";
    else devices[c] = std::atoi(f[2].c_str()), min_sms = std::min(min_sms, std::atoi(f[3].c_str()));
  }
  // 2. single-process: peer access to every other device (a per-device decision, agreed below)
  std::string mine;
  if (why_not_.empty() && !launcher_) {
    for (int c = 0; c < ctx_.world && mine.empty(); ++c) {
      if (devices[c] == ctx_.device) continue;
      int can = 0;
      CUDA_CHECK(cudaDeviceCanAccessPeer(&can, ctx_.device, devices[c]));
      if (!can) mine = "device " + std::to_string(ctx_.device) + " cannot access device " + std::to_string(devices[c]);
      else if (const cudaError_t e = cudaDeviceEnablePeerAccess(devices[c], 0);
               e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled)
        mine = std::string("cudaDeviceEnablePeerAccess: ") + cudaGetErrorString(e);
      cudaGetLastError();  // clear "already enabled"
    }
  }
  // 3. the flag words and the host-mapped timeout word, shared like any buffer
  if (why_not_.empty() && mine.empty()) {
    CUDA_CHECK(cudaMalloc(&flags_, kernels::kP2pFlagWords * sizeof(unsigned)));
    CUDA_CHECK(cudaMemset(flags_, 0, kernels::kP2pFlagWords * sizeof(unsigned)));
    CUDA_CHECK(cudaHostAlloc(&timeout_host_, sizeof(int), cudaHostAllocMapped));
    *timeout_host_ = 0;
  }
  if (why_not_.empty()) {
    const auto oks = ctx_.allgather(mine.empty() ? "ok" : "no|" + mine);
    for (int c = 0; c < ctx_.world && why_not_.empty(); ++c)
      if (oks[c] != "ok") why_not_ = "rank " + std::to_string(c) + ": " + oks[c].substr(3);
  }
  if (why_not_.empty()) {
    available_ = true;
    blocks_ = std::min(kernels::kP2pMaxBlocks, 2 * min_sms);  // 2 x 256 threads per SM: always co-resident
    register_buffers({flags_});
    if (available_) {
      flag_peers_ = peers_.at(flags_);
      ctx_.p2p_timeout = timeout_host_;
    }
  }
  if (!available_ && want == "p2p")
    throw std::runtime_error("rank " + std::to_string(ctx_.rank) + ": ULYSSES_A2A_TRANSPORT=p2p but direct stores are not possible: " +
                             why_not_);
}

P2pTransport::~P2pTransport() {
  if (ctx_.p2p_timeout == timeout_host_) ctx_.p2p_timeout = nullptr;
  cudaSetDevice(ctx_.device);
  for (void* p : opened_) cudaIpcCloseMemHandle(p);
  if (flags_) cudaFree(flags_);
  if (timeout_host_) cudaFreeHost(timeout_host_);
}

void P2pTransport::register_buffers(const std::vector<void*>& mine) {
  if (!available_ || mine.empty()) return;
  CUDA_CHECK(cudaSetDevice(ctx_.device));
  // one record per buffer: the raw address (threads share one address space) or an IPC handle
  std::string rec;
  for (void* p : mine) {
    if (!rec.empty()) rec += ',';
    if (!p) {
      rec += '-';  // an empty buffer, the same on every rank
    } else if (!launcher_) {
      const auto a = reinterpret_cast<std::uintptr_t>(p);
      rec += hex(&a, sizeof a);
    } else {
      cudaIpcMemHandle_t h{};
      CUDA_CHECK(cudaIpcGetMemHandle(&h, p));  // p must be the base of a cudaMalloc allocation
      rec += hex(&h, sizeof h);
    }
  }
  const auto all = ctx_.allgather(rec);
  std::string failed;
  std::vector<std::vector<void*>> at(mine.size(), std::vector<void*>(ctx_.world, nullptr));
  for (int c = 0; c < ctx_.world; ++c) {
    const auto recs = split(all[c], ',');
    if (recs.size() != mine.size()) throw std::runtime_error("p2p: ranks registered different numbers of buffers");
    for (std::size_t k = 0; k < mine.size(); ++k) {
      if (c == ctx_.rank || recs[k] == "-") {
        at[k][c] = c == ctx_.rank ? mine[k] : nullptr;
      } else if (!launcher_) {
        std::uintptr_t a = 0;
        unhex(recs[k], &a, sizeof a);
        at[k][c] = reinterpret_cast<void*>(a);
      } else if (failed.empty()) {
        cudaIpcMemHandle_t h{};
        unhex(recs[k], &h, sizeof h);
        void* p = nullptr;
        if (const cudaError_t e = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess); e != cudaSuccess) {
          cudaGetLastError();
          failed = std::string("cudaIpcOpenMemHandle from rank ") + std::to_string(c) + ": " + cudaGetErrorString(e);
        } else {
          opened_.push_back(p);
          at[k][c] = p;
        }
      }
    }
  }
  // agree: one rank failing to map a peer takes every rank back to NCCL
  const auto oks = ctx_.allgather(failed.empty() ? "ok" : "no|" + failed);
  for (int c = 0; c < ctx_.world; ++c)
    if (oks[c] != "ok") {
      if (why_not_.empty()) why_not_ = "rank " + std::to_string(c) + ": " + oks[c].substr(3);
      available_ = false;
    }
  if (!available_) {
    ctx_.p2p_timeout = nullptr;
    return;
  }
  for (std::size_t k = 0; k < mine.size(); ++k)
    if (mine[k]) peers_[mine[k]] = at[k];
}

void* P2pTransport::peer_address(const void* mine, int c) const {
  auto it = peers_.find(mine);
  return it == peers_.end() ? nullptr : it->second[c];
}

bool P2pTransport::exchange(bool seq_to_head, const std::vector<const void*>& srcs, const std::vector<void*>& dsts,
                            const std::vector<core::Dims>& dims, cudaStream_t stream) {
  if (!available_ || srcs.empty() || srcs.size() > static_cast<std::size_t>(kernels::kP2pMaxJobs)) return false;
  std::vector<kernels::P2pJob> jobs(srcs.size());
  for (std::size_t j = 0; j < srcs.size(); ++j) {
    auto it = peers_.find(dsts[j]);
    if (it == peers_.end()) return false;
    jobs[j].src = srcs[j];
    jobs[j].x = dims[j];
    for (int c = 0; c < ctx_.world; ++c) jobs[j].dst[c] = it->second[c];
  }
  kernels::P2pSync sync;
  sync.self = flags_;
  for (int c = 0; c < ctx_.world; ++c) sync.peer[c] = static_cast<unsigned*>(flag_peers_[c]);
  sync.epoch = ++epoch_;
  sync.timeout_ns = static_cast<long long>(ctx_.timeout_s * 1e9);
  sync.timeout_flag = timeout_host_;
  CUDA_CHECK(kernels::p2p_exchange(seq_to_head, jobs.data(), static_cast<int>(jobs.size()), ctx_.rank, ctx_.world, sync,
                                   blocks_, stream));
  return true;
}

}  // namespace ulysses::runtime::cuda
