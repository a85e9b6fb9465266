#include "runtime/cuda/launcher.hpp"

#include <cstdlib>
#include <string>

#include "core/errors.hpp"

namespace ulysses::runtime::cuda {
namespace {

int env_int(const GetEnv& env, const char* name, int fallback, int min_value) {
  const char* s = env(name);
  if (!s || !*s) return fallback;
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (*end != '\0' || v < min_value || v > 1 << 20)
    throw core::InputError("", std::string("environment ") + name,
                     std::string("'") + s + "' is not an integer >= " + std::to_string(min_value));
  return static_cast<int>(v);
}

bool has(const GetEnv& env, const char* name) {
  const char* s = env(name);
  return s && *s;
}

}  // namespace

LaunchInfo detect_launch(const GetEnv& env) {
  LaunchInfo li;
  if (has(env, "RANK") && has(env, "WORLD_SIZE")) {
    li.launcher = "torchrun";
    li.rank = env_int(env, "RANK", 0, 0);
    li.world = env_int(env, "WORLD_SIZE", 1, 1);
    li.local_rank = env_int(env, "LOCAL_RANK", li.rank, 0);
  } else if (has(env, "OMPI_COMM_WORLD_RANK") && has(env, "OMPI_COMM_WORLD_SIZE")) {
    li.launcher = "mpirun";
    li.rank = env_int(env, "OMPI_COMM_WORLD_RANK", 0, 0);
    li.world = env_int(env, "OMPI_COMM_WORLD_SIZE", 1, 1);
    li.local_rank = env_int(env, "OMPI_COMM_WORLD_LOCAL_RANK", li.rank, 0);
  } else if (has(env, "SLURM_PROCID") && (has(env, "SLURM_STEP_NUM_TASKS") || has(env, "SLURM_STEP_ID"))) {
    // inside srun (a step); a plain sbatch script without srun runs in single-process mode
    li.launcher = "srun";
    li.rank = env_int(env, "SLURM_PROCID", 0, 0);
    li.world = env_int(env, "SLURM_STEP_NUM_TASKS", env_int(env, "SLURM_NTASKS", 1, 1), 1);
    li.local_rank = env_int(env, "SLURM_LOCALID", 0, 0);
  } else {
    return li;  // single-process mode
  }
  li.launched = true;
  if (li.rank >= li.world)
    throw core::InputError("", "environment " + li.launcher + " rank",
                     "rank " + std::to_string(li.rank) + " is not below the world size " + std::to_string(li.world));
  if (has(env, "MASTER_ADDR")) li.master_addr = env("MASTER_ADDR");
  else if (li.launcher == "srun" && has(env, "SLURM_LAUNCH_NODE_IPADDR")) li.master_addr = env("SLURM_LAUNCH_NODE_IPADDR");
  const int master_port = env_int(env, "MASTER_PORT", 29500, 1);
  li.bootstrap_port = env_int(env, "ULYSSES_BOOTSTRAP_PORT", master_port + 1, 1);
  if (li.bootstrap_port > 65535)
    throw core::InputError("", "environment ULYSSES_BOOTSTRAP_PORT/MASTER_PORT", "the bootstrap port must be below 65536");
  li.nccl_comm_id = has(env, "NCCL_COMM_ID");
  return li;
}

LaunchInfo detect_launch() {
  return detect_launch([](const char* n) -> const char* { return std::getenv(n); });
}

}  // namespace ulysses::runtime::cuda
