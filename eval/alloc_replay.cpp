// Replays a recorded allocator trace through the simulation (eval/alloc_replay.hpp).
#include "eval/alloc_replay.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "core/errors.hpp"
#include "sim/caching_allocator.hpp"

namespace ulysses::eval {

AllocReplay replay_alloc_trace(const std::string& path, std::int64_t min_bytes) {
  std::ifstream in(path);
  if (!in) throw core::InputError(path, "file", "cannot be opened");
  AllocReplay r;
  CachingAllocatorSim sim;
  std::unordered_map<std::int64_t, CachingAllocatorSim::Id> ids;  // trace id -> simulated block
  std::unordered_set<std::int64_t> skipped;                        // ids below min_bytes
  std::int64_t mapped = 0;
  bool releasing = false;  // inside a run of unmap lines: one empty_cache() of the process
  std::string line;
  std::int64_t n = 0;
  bool header = false;
  while (std::getline(in, line)) {
    ++n;
    if (const auto hash = line.find(" #"); hash != std::string::npos) line.resize(hash);  // frames: a comment
    if (line.empty()) continue;
    if (line[0] == '#') {
      header = header || line.rfind("# ulysses allocator trace v1", 0) == 0;
      continue;
    }
    if (!header) throw core::InputError(path, "line " + std::to_string(n), "expected the header '# ulysses allocator trace v1' first");
    std::istringstream ls(line);
    char op = 0;
    std::int64_t a = -1, b = -1, c = -1;
    ls >> op;
    if (op != 'u') releasing = false;
    const auto bad = [&](const char* rule) { return core::InputError(path, "line " + std::to_string(n), rule); };
    std::string rest;
    if (op == 'a') {
      if (!(ls >> a >> b >> c) || (ls >> rest)) throw bad("must be 'a ID BYTES STREAM'");
      if (a < 0 || b < 0 || c < 0 || c > 1000000) throw bad("ID, BYTES and STREAM must be non-negative (STREAM <= 1000000)");
      if (ids.count(a) || skipped.count(a)) throw bad("allocation ID used twice");
      if (b < min_bytes) {
        skipped.insert(a);
      } else {
        ids.emplace(a, sim.malloc(b, static_cast<int>(c)));
        ++r.allocs;
      }
    } else if (op == 'f') {
      if (!(ls >> a) || (ls >> rest)) throw bad("must be 'f ID'");
      auto it = ids.find(a);
      if (it == ids.end() && skipped.erase(a)) continue;
      if (it == ids.end()) throw bad("frees an ID that is not allocated");
      sim.free(it->second);
      ids.erase(it);
    } else if (op == 'm' || op == 'u') {
      if (!(ls >> b >> c) || (ls >> rest) || b < 0) throw bad("must be 'm BYTES STREAM' or 'u BYTES STREAM'");
      mapped += op == 'm' ? b : -b;
      if (op == 'u' && !releasing) {
        sim.empty_cache();
        releasing = true;
        ++r.releases;
      }
      r.measured_peak_reserved = std::max(r.measured_peak_reserved, mapped);
    } else {
      throw bad("must start with a, f, m or u");
    }
    ++r.events;
    // after every allocation and free the reserved bytes agree (a map line precedes the allocation that
    // caused it; the simulation maps inside malloc)
    if (op == 'a' || op == 'f') r.max_reserved_gap = std::max(r.max_reserved_gap, std::abs(sim.reserved() - mapped));
  }
  if (!header) throw core::InputError(path, "file", "is not an allocator trace (no '# ulysses allocator trace v1' header)");
  r.simulated_peak_reserved = sim.peak_reserved();
  r.measured_reserved_end = mapped;
  r.simulated_reserved_end = sim.reserved();
  r.simulated_peak_allocated = sim.peak_allocated();
  return r;
}

}  // namespace ulysses::eval
