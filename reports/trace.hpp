#pragma once
// Chrome / Perfetto trace JSON (the "Trace Event Format": complete events "ph":"X" with
// microsecond timestamps, plus process_name / thread_name metadata). Opens in ui.perfetto.dev
// and chrome://tracing. `compare` writes two processes: the predicted timeline (one thread, the
// block's phases back to back) and the measured one (one thread per rank, or per rank/stream).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ulysses::reports {

struct TraceSpan {
  std::string name;
  double start_us = 0;
  double dur_us = 0;
  std::string category;                  // "phase", "segment", ...
  nlohmann::ordered_json args = nullptr;  // shown when the span is selected; null = none
};

struct TraceThread {
  std::string name;                      // e.g. "rank 0", "rank 1 / stream 7", "predicted"
  std::vector<TraceSpan> spans;
};

struct TraceProcess {
  std::string name;                      // e.g. "predicted (sim)", "measured (cpu)"
  std::vector<TraceThread> threads;
};

// The whole trace document: {"traceEvents": [...], "displayTimeUnit": "ms"}. Process i gets
// pid i+1 and thread j of it tid j+1, sorted in the given order.
nlohmann::ordered_json chrome_trace(const std::vector<TraceProcess>& processes);

// chrome_trace() written to `path` through write_file_atomic (reports/file_out.hpp): complete or
// not at all; std::runtime_error naming the path on a write error.
void write_chrome_trace(const std::string& path, const std::vector<TraceProcess>& processes);

}  // namespace ulysses::reports
