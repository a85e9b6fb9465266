#include <algorithm>
#include <mutex>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "runtime/backend_registry.hpp"
#include "runtime/cpu/cpu_backend.hpp"

namespace ulysses::runtime {
namespace {

std::unique_ptr<Backend> make_cpu() { return std::make_unique<cpu::CpuBackend>(); }

struct Registry {
  std::mutex mu;
  std::vector<std::pair<std::string, BackendFactory>> entries{{"cpu", &make_cpu}};
};
Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

void register_backend(const std::string& name, BackendFactory factory) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  for (auto& e : r.entries)
    if (e.first == name) {
      e.second = factory;
      return;
    }
  r.entries.emplace_back(name, factory);
}

std::vector<std::string> registered_backends() {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  std::vector<std::string> names;
  for (auto& e : r.entries) names.push_back(e.first);
  return names;
}

std::unique_ptr<Backend> make_backend(std::string_view name) {
  BackendFactory f = nullptr;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mu);
    for (auto& e : r.entries)
      if (e.first == name) f = e.second;
  }
  if (f) return f();
  if (name == "cuda")
    throw std::runtime_error(
        "backend 'cuda' is not built in this binary (configure on a host with the CUDA toolkit, NCCL, "
        "CUPTI and NVTX)");
  throw std::runtime_error(fmt::format("unknown backend '{}' (available: {})", name,
                                       fmt::join(registered_backends(), ", ")));
}

}  // namespace ulysses::runtime
