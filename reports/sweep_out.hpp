#pragma once
// Sweep outputs on disk: the file names of a whole sweep and of its shards, and `sweep merge`,
// which joins the shards of `ulysses sweep --shard K/N` into the CSV and summary one unsharded run
// writes (the same bytes, but for the timing keys elapsed_s, points_per_s and threads).
#include <cstdint>
#include <string>
#include <vector>

#include "reports/json_out.hpp"
#include "sim/sweep.hpp"

namespace ulysses::reports {

// "<name>" for the whole sweep, "<name>.shard-K-of-N" for a shard: + ".csv", ".summary.json", ".lock".
std::string sweep_output_stem(const std::string& name, const Shard* shard);

// Writes csv (complete, finished) and the summary text so that neither is ever seen half-written
// and an older summary never sits beside the new CSV: the summary is written and finished, the old
// one removed, then the CSV and the summary are renamed in that order.
void commit_sweep_outputs(class AtomicFile& csv, const std::string& summary_path, const std::string& summary_text);

struct MergedSweep {
  std::string csv_path, summary_path;
  std::int64_t shards = 0, points = 0;
  Json summary;
};

// Finds every "<name>.shard-K-of-N.summary.json" (and its CSV beside it) in `dirs` and writes
// out_dir/<name>.csv and out_dir/<name>.summary.json. Every problem is one InputError (exit 2):
// no shards, shards of different sweeps (name, spec fingerprint, tool version or N differ), a
// shard missing or present twice, a CSV missing, or with another header or row count than its summary.
MergedSweep merge_sweep_shards(const std::vector<std::string>& dirs, const std::string& out_dir);

}  // namespace ulysses::reports
