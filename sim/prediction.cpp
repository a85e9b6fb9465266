#include "sim/prediction.hpp"

#include <cstring>

namespace ulysses {

core::bytes_t MemoryBreakdown::get(const char* name) const {
  for (int i = 0; i < n; ++i)
    if (std::strcmp(terms[i].name, name) == 0) return terms[i].bytes;
  return 0;
}

core::seconds_t PhaseTimes::get(const char* name) const {
  for (int i = 0; i < n; ++i)
    if (std::strcmp(phases[i].name, name) == 0) return phases[i].time_s;
  return 0;
}

core::bytes_t predicted_reserved_bytes(const Prediction& p) {
  return p.gpu.total() - p.gpu.get("cuda_context") - p.gpu.get("nccl_buffers");
}

core::bytes_t predicted_allocated_bytes(const Prediction& p) { return predicted_reserved_bytes(p) - p.gpu.get("fragmentation"); }

}  // namespace ulysses
