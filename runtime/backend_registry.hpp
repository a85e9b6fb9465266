#pragma once
// How backends other than "cpu" become reachable through make_backend().
//
// A backend library registers a factory under its name:
//     ulysses::runtime::register_backend("cuda", [] { return std::unique_ptr<Backend>(new CudaBackend); });
// Because the backends are static libraries, a registration object inside one may be dropped by
// the linker when nothing references its object file. So the CUDA library defines
//     void ulysses::runtime::register_cuda_backend();   // calls register_backend("cuda", ...)
// and every program that links ulysses_runtime_cuda (it gets ULYSSES_WITH_CUDA=1) calls it
// once before make_backend("cuda"); eval/block_run.cpp open_backend does so.
#include <memory>
#include <string>
#include <vector>

#include "runtime/backend.hpp"

namespace ulysses::runtime {

using BackendFactory = std::unique_ptr<Backend> (*)();

void register_backend(const std::string& name, BackendFactory factory);  // replaces a same-named one
std::vector<std::string> registered_backends();                          // "cpu" first

void register_cuda_backend();  // defined by runtime/cuda/ when the CUDA backend is built

}  // namespace ulysses::runtime
