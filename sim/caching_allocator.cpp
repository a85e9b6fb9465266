// PyTorch's caching allocator with expandable segments, simulated (sim/caching_allocator.hpp). Each rule
// names its function in c10/cuda/CUDACachingAllocator.cpp; docs/MODEL.md "Reserved memory" quotes the lines.
#include "sim/caching_allocator.hpp"

#include <iterator>

namespace ulysses {

// round_size: below kMinBlockSize a request takes one minimum block, above it rounds up to a multiple.
std::int64_t alloc_round_size(std::int64_t bytes) {
  if (bytes < kAllocMinBlock) return kAllocMinBlock;
  return (bytes + kAllocMinBlock - 1) / kAllocMinBlock * kAllocMinBlock;
}

std::int64_t CachingAllocatorSim::reserved_on(int stream) const {
  std::int64_t r = 0;
  for (const Arena& ar : arenas_)
    if (ar.stream == stream) r += ar.mapped;
  return r;
}

// get_pool / ExpandableSegment: the small and the large pool of each stream map their own segment.
CachingAllocatorSim::Arena& CachingAllocatorSim::arena_for(int stream, bool small) {
  for (Arena& ar : arenas_)
    if (ar.stream == stream && ar.small == small) return ar;
  arenas_.push_back(Arena{stream, small, 0, {}, {}});
  return arenas_.back();
}

bool CachingAllocatorSim::tail_free(const Arena& ar, std::int64_t addr) const {
  auto it = ar.by_addr.find(addr);
  if (it == ar.by_addr.end()) return false;
  const Block& b = blocks_.at(it->second);
  return b.free && b.addr + b.size == ar.mapped;
}

// A free block of the arena becomes allocated.
CachingAllocatorSim::Id CachingAllocatorSim::take(Arena& ar, std::int64_t addr) {
  const Id id = ar.by_addr.at(addr);
  Block& b = blocks_.at(id);
  ar.free.erase({b.size, b.addr});
  b.free = false;
  return id;
}

// alloc_found_block + should_split: with expandable segments every remainder of at least kMinBlockSize is
// split off (in both pools); the request keeps the low addresses, the remainder stays free above it.
void CachingAllocatorSim::split_off(Arena& ar, int arena_index, Id id, std::int64_t size) {
  Block& b = blocks_.at(id);
  const std::int64_t remaining = b.size - size;
  if (remaining < kAllocMinBlock) return;
  b.size = size;
  const std::int64_t at = b.addr + size;
  const Id rest = next_id_++;
  blocks_[rest] = Block{at, remaining, true, arena_index};
  ar.by_addr[at] = rest;
  ar.free.insert({remaining, at});
}

CachingAllocatorSim::Id CachingAllocatorSim::malloc(std::int64_t bytes, int stream) {
  const std::int64_t size = alloc_round_size(bytes);
  const bool small = size <= kAllocSmallSize;
  Arena& ar = arena_for(stream, small);
  const int ai = static_cast<int>(&ar - arenas_.data());
  // get_free_block: the smallest free block that fits (ties: the lowest address). The block at the end
  // of the mapped part counts as as large as it could grow, so any other block that fits goes first.
  auto it = ar.free.lower_bound({size, 0});
  if (it != ar.free.end() && tail_free(ar, it->second)) {
    auto next = std::next(it);
    if (next != ar.free.end()) it = next;
  }
  Id id;
  if (it != ar.free.end()) {
    id = take(ar, it->second);
  } else {
    // try_allocate_expandable_block: grow the mapping at the segment's end by whole granules, joined
    // with the free block that ends there, if any
    const std::int64_t granule = small ? kAllocSmallGranule : kAllocLargeGranule;
    std::int64_t start = ar.mapped, have = 0;
    if (!ar.by_addr.empty()) {
      const Id last = std::prev(ar.by_addr.end())->second;
      const Block& lb = blocks_.at(last);
      if (lb.free) {
        start = lb.addr;
        have = lb.size;
      }
    }
    const std::int64_t grow = (size - have + granule - 1) / granule * granule;
    ar.mapped += grow;
    reserved_ += grow;
    if (reserved_ > peak_reserved_) peak_reserved_ = reserved_;
    if (have > 0) {
      const Id last = ar.by_addr.at(start);
      Block& lb = blocks_.at(last);
      ar.free.erase({lb.size, lb.addr});
      lb.size += grow;
      ar.free.insert({lb.size, lb.addr});
    } else {
      const Id nb = next_id_++;
      blocks_[nb] = Block{start, grow, true, ai};
      ar.by_addr[start] = nb;
      ar.free.insert({grow, start});
    }
    id = take(ar, start);
  }
  split_off(ar, ai, id, size);
  allocated_ += size;
  if (allocated_ > peak_allocated_) peak_allocated_ = allocated_;
  return id;
}

// free_block + try_merge_blocks: the block joins its free neighbours.
void CachingAllocatorSim::free(Id id) {
  auto bit = blocks_.find(id);
  if (bit == blocks_.end() || bit->second.free) return;
  Arena& ar = arenas_[static_cast<std::size_t>(bit->second.arena)];
  Id keep = id;
  allocated_ -= bit->second.size;
  bit->second.free = true;
  auto here = ar.by_addr.find(bit->second.addr);
  auto after = std::next(here);
  if (after != ar.by_addr.end() && blocks_.at(after->second).free) {
    Block& n = blocks_.at(after->second);
    ar.free.erase({n.size, n.addr});
    bit->second.size += n.size;
    blocks_.erase(after->second);
    ar.by_addr.erase(after);
  }
  if (here != ar.by_addr.begin()) {
    auto before = std::prev(here);
    Block& p = blocks_.at(before->second);
    if (p.free) {
      ar.free.erase({p.size, p.addr});
      p.size += bit->second.size;
      keep = before->second;
      ar.by_addr.erase(here);
      blocks_.erase(bit);
    }
  }
  const Block& k = blocks_.at(keep);
  ar.free.insert({k.size, k.addr});
}

}  // namespace ulysses
