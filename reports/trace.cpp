// Chrome / Perfetto trace JSON (reports/trace.hpp).
#include "reports/trace.hpp"

#include "reports/file_out.hpp"

namespace ulysses::reports {

namespace {
using Json = nlohmann::ordered_json;

Json meta(const char* what, int pid, int tid, Json args) {
  Json e;
  e["name"] = what;
  e["ph"] = "M";
  e["pid"] = pid;
  e["tid"] = tid;
  e["args"] = std::move(args);
  return e;
}
}  // namespace

Json chrome_trace(const std::vector<TraceProcess>& processes) {
  Json events = Json::array();
  for (std::size_t i = 0; i < processes.size(); ++i) {
    const int pid = static_cast<int>(i) + 1;
    events.push_back(meta("process_name", pid, 0, {{"name", processes[i].name}}));
    events.push_back(meta("process_sort_index", pid, 0, {{"sort_index", pid}}));
    for (std::size_t j = 0; j < processes[i].threads.size(); ++j) {
      const TraceThread& t = processes[i].threads[j];
      const int tid = static_cast<int>(j) + 1;
      events.push_back(meta("thread_name", pid, tid, {{"name", t.name}}));
      events.push_back(meta("thread_sort_index", pid, tid, {{"sort_index", tid}}));
      for (const TraceSpan& s : t.spans) {
        Json e;
        e["name"] = s.name;
        e["cat"] = s.category.empty() ? "span" : s.category;
        e["ph"] = "X";
        e["pid"] = pid;
        e["tid"] = tid;
        e["ts"] = s.start_us;
        e["dur"] = s.dur_us;
        if (!s.args.is_null()) e["args"] = s.args;
        events.push_back(std::move(e));
      }
    }
  }
  Json doc;
  doc["traceEvents"] = std::move(events);
  doc["displayTimeUnit"] = "ms";
  return doc;
}

void write_chrome_trace(const std::string& path, const std::vector<TraceProcess>& processes) {
  write_file_atomic(path, chrome_trace(processes).dump(1) + "\n");
}

}  // namespace ulysses::reports
