#pragma once
// The NCCL unique id, from rank 0 to every rank, over one small TCP exchange (launcher mode).
//   rank 0 listens on 0.0.0.0:port, accepts world-1 connections; each peer sends
//     {magic, rank, world}; rank 0 checks that every world size equals its own and every rank
//     appears once, then answers {status 0, id} (or {status 1, message} to all when not).
//   ranks > 0 connect to addr:port, retrying until the deadline, and read the answer.
// Everything is bounded by timeout_s: a missing rank, a wrong world size or an unreachable
// rank 0 ends in std::runtime_error with one line saying which, never a hang.
#include <string>

#include <nccl.h>

namespace ulysses::runtime::cuda {

ncclUniqueId exchange_unique_id(int rank, int world, const std::string& addr, int port, double timeout_s);

}  // namespace ulysses::runtime::cuda
