#include "runtime/cuda/tracing.hpp"

#include <algorithm>

#include <cxxabi.h>
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <map>

#include <cupti.h>
#include <nvtx3/nvToolsExt.h>

namespace ulysses::runtime::cuda {
namespace {

constexpr std::size_t kBufferBytes = 8 << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

std::map<std::uint32_t, ActivityRecord>& open_markers() {  // START records waiting for their END (under Cupti mu via add order)
  static std::map<std::uint32_t, ActivityRecord> m;
  return m;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  Cupti& c = Cupti::instance();
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    ActivityRecord r;
    switch (rec->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      case CUPTI_ACTIVITY_KIND_KERNEL: {
        auto* k = reinterpret_cast<CUpti_ActivityKernel10*>(rec);
        r.kind = ActivityRecord::kernel, r.name = short_kernel_name(k->name), r.start_ns = k->start, r.end_ns = k->end;
        r.device = k->deviceId, r.stream = k->streamId;
        c.add(std::move(r));
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        auto* m = reinterpret_cast<CUpti_ActivityMemcpy6*>(rec);
        r.kind = ActivityRecord::memcpy, r.start_ns = m->start, r.end_ns = m->end, r.device = m->deviceId, r.stream = m->streamId;
        r.name = "memcpy " + std::to_string(m->bytes) + " B";
        c.add(std::move(r));
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        auto* m = reinterpret_cast<CUpti_ActivityMemset4*>(rec);
        r.kind = ActivityRecord::memset, r.start_ns = m->start, r.end_ns = m->end, r.device = m->deviceId, r.stream = m->streamId;
        r.name = "memset " + std::to_string(m->bytes) + " B";
        c.add(std::move(r));
        break;
      }
      case CUPTI_ACTIVITY_KIND_MARKER: {
        auto* m = reinterpret_cast<CUpti_ActivityMarker2*>(rec);
        auto& open = open_markers();
        if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_START) {
          r.kind = ActivityRecord::marker, r.name = m->name ? m->name : "", r.start_ns = m->timestamp;
          r.thread = m->objectId.pt.threadId;
          open[m->id] = r;
        } else if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_END) {
          auto it = open.find(m->id);
          if (it != open.end()) {
            it->second.end_ns = m->timestamp;
            c.add(std::move(it->second));
            open.erase(it);
          }
        }
        break;
      }
      default:
        break;
    }
  }
  std::free(buffer);
}

}  // namespace

void prepare_nvtx_injection() {
  static const bool done = [] {
    if (!std::getenv("NVTX_INJECTION64_PATH")) {
      Dl_info info{};
      if (dladdr(reinterpret_cast<void*>(&cuptiActivityEnable), &info) && info.dli_fname)
        setenv("NVTX_INJECTION64_PATH", info.dli_fname, 0);
    }
    return true;
  }();
  (void)done;
}

NvtxRange::NvtxRange(const char* name) { nvtxRangePushA(name); }
NvtxRange::~NvtxRange() { nvtxRangePop(); }

Cupti& Cupti::instance() {
  static Cupti c;
  return c;
}

Cupti& Cupti::get() {
  Cupti& c = instance();
  if (c.enabled_ && !c.active_) {
    std::lock_guard lock(c.toggle_mu_);
    if (!c.active_) c.active_ = c.set_kinds(true);
  }
  return c;
}

namespace {
constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMSET};
}  // namespace

bool Cupti::set_kinds(bool on) {
  bool ok = true;
  for (auto k : kKinds) ok = ((on ? cuptiActivityEnable(k) : cuptiActivityDisable(k)) == CUPTI_SUCCESS) && ok;
  if (markers_) ok = ((on ? cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MARKER) : cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MARKER)) ==
                      CUPTI_SUCCESS) && ok;
  return ok;
}

void Cupti::pause() {
  if (!enabled_) return;
  {
    std::lock_guard toggle(toggle_mu_);
    if (!active_) return;
    set_kinds(false);  // first, so that no record of later work arrives after the clear below
    active_ = false;
  }
  cuptiActivityFlushAll(1);  // its buffers reach add() (mu_) on this thread or CUPTI's
  std::lock_guard lock(mu_);
  records_.clear();  // (an NVTX range still open at the pause keeps its START in open_markers: a few bytes)
}

Cupti::Cupti() {
  prepare_nvtx_injection();
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS) {
    status_ = "CUPTI unavailable (cuptiActivityRegisterCallbacks failed)";
    return;
  }
  for (auto k : kKinds)
    if (cuptiActivityEnable(k) != CUPTI_SUCCESS) {
      status_ = "CUPTI activity kind " + std::to_string(static_cast<int>(k)) + " could not be enabled";
      return;
    }
  enabled_ = active_ = true;
  const char* inj = std::getenv("NVTX_INJECTION64_PATH");
  markers_ = inj && std::strstr(inj, "cupti") && cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MARKER) == CUPTI_SUCCESS;
  status_ = std::string("CUPTI: kernels, memcpy, memset") + (markers_ ? ", NVTX markers" : " (no NVTX markers)");
}

std::uint64_t Cupti::now_ns() {
  std::uint64_t t = 0;
  cuptiGetTimestamp(&t);
  return t;
}

void Cupti::add(ActivityRecord r) {
  std::lock_guard lock(mu_);
  records_.push_back(std::move(r));
}

std::vector<ActivityRecord> Cupti::take(std::uint32_t device, std::uint64_t from_ns, std::uint64_t to_ns) {
  if (!enabled_) return {};
  cuptiActivityFlushAll(1);
  std::lock_guard lock(mu_);
  std::vector<ActivityRecord> mine, rest;
  for (auto& r : records_) {
    const bool in_window = r.start_ns >= from_ns && r.start_ns <= to_ns;
    if (r.kind == ActivityRecord::marker) {  // every rank thread may want it: copy, keep
      if (in_window) mine.push_back(r);
      rest.push_back(std::move(r));
    } else if (r.device != device) {
      rest.push_back(std::move(r));
    } else if (in_window) {
      mine.push_back(std::move(r));
    } else if (r.start_ns > to_ns) {
      rest.push_back(std::move(r));
    }  // else: this device's older work (warm-up, timed iterations): dropped
  }
  records_ = std::move(rest);
  return mine;
}

std::string short_kernel_name(const char* mangled) {
  if (!mangled) return "kernel";
  int st = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &st);
  std::string s = (st == 0 && d) ? d : mangled;
  std::free(d);
  // drop namespaces we own, the parameter list and a leading "void "
  for (const char* ns : {"ulysses::kernels::(anonymous namespace)::", "ulysses::kernels::", "(anonymous namespace)::"})
    for (std::size_t p; (p = s.find(ns)) != std::string::npos;) s.erase(p, std::strlen(ns));
  int depth = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<') ++depth;
    else if (s[i] == '>') --depth;
    else if (s[i] == '(' && depth == 0 && i > 0) {
      s.resize(i);
      break;
    }
  }
  if (s.rfind("void ", 0) == 0) s.erase(0, 5);
  if (s.size() > 96) s = s.substr(0, 93) + "...";
  return s;
}

double busy_s(std::vector<std::pair<std::uint64_t, std::uint64_t>> iv) {
  std::sort(iv.begin(), iv.end());
  double total = 0;
  std::uint64_t cur_b = 0, cur_e = 0;
  bool open = false;
  for (auto [b, e] : iv) {
    if (!open || b > cur_e) {
      if (open) total += static_cast<double>(cur_e - cur_b);
      cur_b = b, cur_e = e, open = true;
    } else {
      cur_e = std::max(cur_e, e);
    }
  }
  if (open) total += static_cast<double>(cur_e - cur_b);
  return total * 1e-9;
}

}  // namespace ulysses::runtime::cuda
