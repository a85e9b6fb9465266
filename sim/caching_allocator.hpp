#pragma once
// PyTorch's CUDA caching allocator under PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, simulated
// block by block: which bytes it keeps mapped (max_memory_reserved) for a sequence of allocations and
// frees, when memory is never short (nothing is released). Rules and their lines in
// c10/cuda/CUDACachingAllocator.cpp: docs/MODEL.md "Reserved memory".
#include <cstdint>
#include <map>
#include <set>
#include <vector>

namespace ulysses {

// The allocator's constants (CUDACachingAllocator.cpp, docs/MODEL.md "Reserved memory").
inline constexpr std::int64_t kAllocMinBlock = 512;            // kMinBlockSize: every size rounds up to it
inline constexpr std::int64_t kAllocSmallSize = 1 << 20;        // kSmallSize: larger requests use the large pool
inline constexpr std::int64_t kAllocSmallGranule = 2 << 20;     // kSmallBuffer: the small pool maps by 2 MiB
inline constexpr std::int64_t kAllocLargeGranule = 20 << 20;    // kLargeBuffer: the large pool maps by 20 MiB

std::int64_t alloc_round_size(std::int64_t bytes);

class CachingAllocatorSim {
 public:
  using Id = std::int64_t;
  // Allocates `bytes` on `stream` (any integer naming a stream); returns the block's id.
  Id malloc(std::int64_t bytes, int stream);
  // Returns a block to its pool (the allocator's free_completed). An unknown or free id is ignored.
  void free(Id id);
  // torch.cuda.empty_cache(): every whole granule inside a free block is unmapped.
  void empty_cache();

  std::int64_t reserved() const { return reserved_; }
  std::int64_t peak_reserved() const { return peak_reserved_; }
  std::int64_t allocated() const { return allocated_; }
  std::int64_t peak_allocated() const { return peak_allocated_; }
  std::int64_t reserved_on(int stream) const;  // both pools of one stream

 private:
  // A block of a segment: allocated, free (mapped) or unmapped address space.
  struct Block {
    std::int64_t size = 0;
    bool allocated = false, mapped = true;
  };
  // One expandable segment per (stream, pool): its blocks by address cover [0, kVirtual).
  struct Arena {
    int stream = 0;
    bool small = false;
    std::int64_t granule = 0, mapped = 0;
    std::map<std::int64_t, Block> blocks;                  // address -> block
    std::set<std::pair<std::int64_t, std::int64_t>> free;  // free mapped blocks (size, address)
  };
  using It = std::map<std::int64_t, Block>::iterator;
  Arena& arena_for(int stream, bool small);
  static std::int64_t expandable_size(Arena& ar, It b);
  It find_expandable(Arena& ar, std::int64_t size);
  It map_block(Arena& ar, It b, std::int64_t size);
  It merge(Arena& ar, It b);  // with free neighbours of the same mapped state
  void add_free(Arena& ar, It b) { ar.free.insert({b->second.size, b->first}); }
  void drop_free(Arena& ar, It b) { ar.free.erase({b->second.size, b->first}); }

  std::vector<Arena> arenas_;
  std::map<Id, std::pair<int, std::int64_t>> live_;  // id -> (arena, address)
  Id next_id_ = 0;
  std::int64_t reserved_ = 0, peak_reserved_ = 0, allocated_ = 0, peak_allocated_ = 0;
};

}  // namespace ulysses
