#pragma once
// The sweep engine: the cartesian product of a SweepSpec's axes (last axis fastest), each point
// checked (invalid points skipped, counted by reason) then evaluated with predict() (mode
// "predict") or find_max_seq_len() (mode "plan"), on all cores. Rows are produced by the
// caller's formatter on the worker threads and handed back in point order.
#include <atomic>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/config.hpp"
#include "sim/prediction.hpp"

namespace ulysses {

struct SweepPoint {
  std::int64_t index = 0;                   // position in the product, 0-based
  const std::int32_t* value_index = nullptr;// per axis: index into spec.axes[a].values
  const Scenario* scenario = nullptr;       // base + axis values (+ derived dp_shard_size)
  bool valid = false;
  std::string_view reason;                  // check()'s rule when !valid
  const Prediction* prediction = nullptr;   // valid only: at seq_len (predict) or at the longest (plan)
  std::int64_t seq_len = 0;                 // evaluated (predict) or longest that fits (plan; 0 = none)
  Binding binding = Binding::none;          // predict: what does not fit; plan: what binds first
  bool fits = false;
};

struct SweepStats {
  std::int64_t points = 0;                  // points run (the slice's size with SweepOptions::first/end)
  std::int64_t valid = 0;
  std::vector<std::pair<std::string, std::int64_t>> skipped;  // reason -> count, most frequent first
  double elapsed_s = 0;
  double points_per_s = 0;
  int threads = 1;
};

struct SweepOptions {
  int threads = 0;              // 0 = std::thread::hardware_concurrency()
  std::int64_t chunk = 512;     // points per work item
  // Called on worker threads: append the point's row to `out`.
  std::function<void(const SweepPoint&, std::string& out)> row;
  // Called on the calling thread with the rows of each chunk, in point order.
  std::function<void(const std::string& rows)> sink;
  // Called on the calling thread now and then (and once at the end).
  std::function<void(std::int64_t done, std::int64_t total)> progress;
  // Polled by the workers and the writer: non-zero (e.g. a signal number) stops the sweep, which
  // then throws SweepStopped after the workers have joined; no row is handed to the sink after it.
  const std::atomic<int>* stop = nullptr;
  // The points run: [first, end) of the product (end < 0: to the last point). A shard's slice.
  std::int64_t first = 0;
  std::int64_t end = -1;
};

// SweepStats::skipped's order: most frequent first, then by reason.
void sort_skipped(std::vector<std::pair<std::string, std::int64_t>>& skipped);

// One of N slices of a sweep (`ulysses sweep --shard K/N`): the K-th, 1-based.
struct Shard {
  std::int64_t index = 1;
  std::int64_t count = 1;
};
inline constexpr std::int64_t kMaxShards = 1 << 20;
// "K/N" with 1 <= K <= N <= kMaxShards, decimal digits only; InputError("", key, rule) otherwise.
Shard parse_shard(const std::string& text, const std::string& key);
// The points of shard K of N: contiguous slices in point order, sizes differing by at most one, so
// the shards' rows concatenated in K order are the rows of the whole sweep. Returns [first, end).
std::pair<std::int64_t, std::int64_t> shard_points(std::int64_t total, Shard s);
// Canonical text of everything that decides a sweep's rows: name, mode, granularity, the axes and
// the resolved base scenario (to_yaml, so presets edited between runs change it). Shards are
// merged only when the fingerprints of this text agree.
std::string sweep_spec_text(const SweepSpec& spec);

// Thrown by run_sweep when SweepOptions::stop became non-zero; `value` is what it held.
struct SweepStopped : std::runtime_error {
  int value;
  explicit SweepStopped(int v) : std::runtime_error("sweep stopped"), value(v) {}
};

// The spec's `name` becomes file names in the output folder (DIR/<name>.csv): it must be 1 to
// 128 characters of [A-Za-z0-9._-], not starting with '.' (so never a path, never hidden).
// Returns the broken rule, or "" when the name is fine.
std::string sweep_name_rule(const std::string& name);
// InputError naming the spec file and key `name` when sweep_name_rule() finds a problem.
void check_sweep_name(const SweepSpec& spec);

// Product of the axis sizes; InputError when an axis is empty or the product exceeds 2^40.
std::int64_t sweep_points(const SweepSpec& spec);

// Every axis value is first applied once to the base (a bad value: InputError naming the spec
// file and key). Points are then set up incrementally: when axis a changes, axes a..n-1 are
// re-applied (set_key overwrites its key, so this equals applying every axis in order to the base).
// Axes over "model" and "profile" load each preset once and assign it. dp_shard_size follows
// set_key's rule: with `dp_shard_size: auto` (the default of a scenario without it) it is
// re-derived from gpus, sp_size and dp_replicate_size.
SweepStats run_sweep(const SweepSpec& spec, const SweepOptions& opt);

}  // namespace ulysses
