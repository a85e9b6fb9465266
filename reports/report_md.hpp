#pragma once
// The Markdown summary of `ulysses report` (summary.md) and the data its plot script reads
// (report_data.json): longest-sequence tables with step time and tokens/s, memory by family
// (sim/memory_families.hpp) and by term, predictions, sweeps, and the plots embedded by paths
// relative to summary.md's folder.
#include <string>
#include <vector>

#include "reports/json_out.hpp"

namespace ulysses::reports {

struct ReportInputs {
  std::vector<Json> results;  // plan / predict JSON (checked by check_result_json, with "source_file")
  std::vector<Json> sweeps;   // sweep summaries (checked, "csv" resolved, with "summary_file")
};

// InputError(file, "gpu_memory_bytes.<term>", ...) when a memory term has no family.
void check_memory_terms(const Json& result, const std::string& file);

// {"order": [family names, stacking order], "terms": {term: family}}: what the plots group by.
Json memory_families_json();

// What the plot script reads: results, sweeps (each with "hbm_bytes_by_profile": the HBM of
// every profile the sweep names, loaded by name) and the memory families.
Json report_data_json(const ReportInputs& in);

// summary.md. pngs: file names of the plots, relative to the folder summary.md is written to.
std::string report_markdown(const ReportInputs& in, const std::string& title, const std::string& note,
                            const std::vector<std::string>& pngs);

}  // namespace ulysses::reports
