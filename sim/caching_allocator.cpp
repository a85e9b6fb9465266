// PyTorch's caching allocator with expandable segments, simulated (sim/caching_allocator.hpp). Each rule
// names its function in c10/cuda/CUDACachingAllocator.cpp; docs/MODEL.md "Reserved memory" quotes the lines.
#include "sim/caching_allocator.hpp"

#include <iterator>

namespace ulysses {
namespace {
// The address space one segment reserves (about 1.125x the GPU's memory there): never the limit here.
constexpr std::int64_t kVirtual = std::int64_t{1} << 50;
std::int64_t round_up(std::int64_t x, std::int64_t g) { return (x + g - 1) / g * g; }
std::int64_t round_down(std::int64_t x, std::int64_t g) { return x / g * g; }
}  // namespace

// round_size: below kMinBlockSize a request takes one minimum block, above it rounds up to a multiple.
std::int64_t alloc_round_size(std::int64_t bytes) {
  if (bytes < kAllocMinBlock) return kAllocMinBlock;
  return round_up(bytes, kAllocMinBlock);
}

std::int64_t CachingAllocatorSim::reserved_on(int stream) const {
  std::int64_t r = 0;
  for (const Arena& ar : arenas_)
    if (ar.stream == stream) r += ar.mapped;
  return r;
}

// get_pool + find_expandable_block: the small and the large pool of each stream map their own segment
// (granule kSmallBuffer or large_segment_size), all of it unmapped address space at first.
CachingAllocatorSim::Arena& CachingAllocatorSim::arena_for(int stream, bool small) {
  for (Arena& ar : arenas_)
    if (ar.stream == stream && ar.small == small) return ar;
  Arena ar;
  ar.stream = stream;
  ar.small = small;
  ar.granule = small ? kAllocSmallGranule : kAllocLargeGranule;
  ar.blocks[0] = Block{kVirtual, false, false};
  arenas_.push_back(std::move(ar));
  return arenas_.back();
}

// get_free_block's best-fit order counts a free block that unmapped space follows as that much larger.
std::int64_t CachingAllocatorSim::expandable_size(Arena& ar, It b) {
  auto n = std::next(b);
  return b->second.size + (n != ar.blocks.end() && !n->second.mapped ? n->second.size : 0);
}

// try_merge_blocks: a block joins a neighbour that is not allocated and has the same mapped state.
CachingAllocatorSim::It CachingAllocatorSim::merge(Arena& ar, It b) {
  auto n = std::next(b);
  if (n != ar.blocks.end() && !n->second.allocated && n->second.mapped == b->second.mapped) {
    if (n->second.mapped) drop_free(ar, n);
    b->second.size += n->second.size;
    ar.blocks.erase(n);
  }
  if (b != ar.blocks.begin()) {
    auto p = std::prev(b);
    if (!p->second.allocated && p->second.mapped == b->second.mapped) {
      if (p->second.mapped) drop_free(ar, p);
      p->second.size += b->second.size;
      ar.blocks.erase(b);
      b = p;
    }
  }
  return b;
}

// find_expandable_block: the lowest unmapped range (joined with the free block before it) from which
// free and unmapped blocks in a row hold the request.
CachingAllocatorSim::It CachingAllocatorSim::find_expandable(Arena& ar, std::int64_t size) {
  for (It c = ar.blocks.begin(); c != ar.blocks.end(); ++c) {
    if (c->second.mapped) continue;
    It start = c;
    if (c != ar.blocks.begin() && !std::prev(c)->second.allocated) start = std::prev(c);
    std::int64_t bytes = 0;
    for (It w = start; w != ar.blocks.end() && bytes < size && !w->second.allocated; ++w) bytes += w->second.size;
    if (bytes >= size) return start;
  }
  return ar.blocks.end();  // not reached: the last block is kVirtual bytes of unmapped space
}

// map_block: maps whole granules from the unmapped block's start (its address is granule-aligned),
// the rest stays unmapped; the mapped part joins free neighbours.
CachingAllocatorSim::It CachingAllocatorSim::map_block(Arena& ar, It b, std::int64_t size) {
  const std::int64_t m = std::min(round_up(size, ar.granule), b->second.size);
  if (m < b->second.size) ar.blocks[b->first + m] = Block{b->second.size - m, false, false};
  b->second.size = m;
  b->second.mapped = true;
  ar.mapped += m;
  reserved_ += m;
  if (reserved_ > peak_reserved_) peak_reserved_ = reserved_;
  b = merge(ar, b);
  add_free(ar, b);
  return b;
}

CachingAllocatorSim::Id CachingAllocatorSim::malloc(std::int64_t bytes, int stream) {
  const std::int64_t size = alloc_round_size(bytes);
  Arena& ar = arena_for(stream, size <= kAllocSmallSize);
  const int ai = static_cast<int>(&ar - arenas_.data());
  // get_free_block: the smallest free block that fits (lowest address among equals), moving on to the
  // next one in that order while it counts smaller with the unmapped space behind it
  It b = ar.blocks.end();
  auto it = ar.free.lower_bound({size, 0});
  if (it != ar.free.end()) {
    for (auto nx = std::next(it); nx != ar.free.end(); ++nx) {
      if (expandable_size(ar, ar.blocks.find(nx->second)) >= expandable_size(ar, ar.blocks.find(it->second))) break;
      it = nx;
    }
    b = ar.blocks.find(it->second);
  } else {
    // try_allocate_expandable_block: map from the candidate on until the block holds the request
    b = find_expandable(ar, size);
    if (!b->second.mapped) b = map_block(ar, b, std::min(b->second.size, size));
    while (b->second.size < size) b = map_block(ar, std::next(b), std::min(size - b->second.size, std::next(b)->second.size));
  }
  drop_free(ar, b);
  // alloc_found_block + should_split: with expandable segments a remainder of kMinBlockSize or more is
  // split off; the request keeps the low addresses
  const std::int64_t rest = b->second.size - size;
  if (rest >= kAllocMinBlock) {
    b->second.size = size;
    auto r = ar.blocks.emplace(b->first + size, Block{rest, false, true}).first;
    add_free(ar, r);
  }
  b->second.allocated = true;
  allocated_ += b->second.size;
  if (allocated_ > peak_allocated_) peak_allocated_ = allocated_;
  const Id id = next_id_++;
  live_[id] = {ai, b->first};
  return id;
}

// free_block: the block joins its free neighbours.
void CachingAllocatorSim::free(Id id) {
  auto l = live_.find(id);
  if (l == live_.end()) return;
  Arena& ar = arenas_[static_cast<std::size_t>(l->second.first)];
  It b = ar.blocks.find(l->second.second);
  live_.erase(l);
  allocated_ -= b->second.size;
  b->second.allocated = false;
  add_free(ar, merge(ar, b));
}

// release_cached_blocks -> release_blocks -> unmap_block: each free block gives up the whole granules
// inside it; the unmapped part joins unmapped neighbours.
void CachingAllocatorSim::empty_cache() {
  for (Arena& ar : arenas_) {
    std::vector<std::int64_t> frees;
    for (const auto& f : ar.free) frees.push_back(f.second);
    for (std::int64_t addr : frees) {
      It b = ar.blocks.find(addr);
      const std::int64_t lo = round_up(b->first, ar.granule), hi = round_down(b->first + b->second.size, ar.granule);
      if (hi <= lo) continue;
      drop_free(ar, b);
      const std::int64_t end = b->first + b->second.size;
      if (lo > b->first) {
        b->second.size = lo - b->first;
        add_free(ar, b);
        b = ar.blocks.emplace(lo, Block{}).first;
      }
      if (end > hi) add_free(ar, ar.blocks.emplace(hi, Block{end - hi, false, true}).first);
      b->second = Block{hi - lo, false, false};
      ar.mapped -= hi - lo;
      reserved_ -= hi - lo;
      merge(ar, b);
    }
  }
}

}  // namespace ulysses
