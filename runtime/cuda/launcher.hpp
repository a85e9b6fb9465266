#pragma once
// Which process model this process runs under.
//   launcher mode: one process per GPU started by torchrun (--no-python), srun or mpirun; rank,
//     world size and local rank come from the launcher's environment:
//       torchrun  RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT
//       mpirun    OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK (+ MASTER_ADDR)
//       srun      SLURM_PROCID, SLURM_STEP_NUM_TASKS (or SLURM_NTASKS), SLURM_LOCALID
//                 (+ MASTER_ADDR, else SLURM_LAUNCH_NODE_IPADDR)
//     The NCCL unique id travels from rank 0 over TCP (runtime/cuda/bootstrap.hpp) at
//     MASTER_ADDR : ULYSSES_BOOTSTRAP_PORT (default MASTER_PORT + 1; MASTER_PORT default 29500),
//     unless NCCL_COMM_ID is set, in which case NCCL bootstraps from it directly.
//   single-process mode (no launcher variables): this process drives P local GPUs, one thread each.
#include <functional>
#include <string>

namespace ulysses::runtime::cuda {

struct LaunchInfo {
  bool launched = false;   // a launcher's variables were found
  std::string launcher;    // "torchrun" | "mpirun" | "srun" | ""
  int rank = 0, world = 1, local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int bootstrap_port = 0;  // TCP port of the unique-id exchange
  bool nccl_comm_id = false;  // NCCL_COMM_ID set: every rank calls ncclGetUniqueId itself
};

using GetEnv = std::function<const char*(const char*)>;

// Throws ulysses::core::InputError naming the variable when one is malformed or inconsistent.
LaunchInfo detect_launch(const GetEnv& getenv_fn);
LaunchInfo detect_launch();  // from the process environment

}  // namespace ulysses::runtime::cuda
