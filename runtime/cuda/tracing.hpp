#pragma once
// NVTX ranges and CUPTI activity records of the CUDA backend.
//   - Every phase runs under an NVTX range named exactly as docs/DESIGN.md (a2a.qkv.fwd, ...).
//   - CUPTI records kernels (CONCURRENT_KERNEL: ours and NCCL's), memcpy, memset and, when
//     NVTX_INJECTION64_PATH names libcupti.so, the NVTX ranges themselves (MARKER).
//     prepare_nvtx_injection() sets that variable (if unset) before the first NVTX call.
//   - The runtime attributes records to phases by time: in the traced iteration every phase
//     starts after the previous one finished on the GPU (host wait), and its window
//     [begin_ns, end_ns] on CUPTI's clock (cuptiGetTimestamp) holds exactly its GPU work.
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace ulysses::runtime::cuda {

void prepare_nvtx_injection();  // idempotent; call before any NVTX call

class NvtxRange {
 public:
  explicit NvtxRange(const char* name);
  ~NvtxRange();
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

struct ActivityRecord {
  enum Kind { kernel, memcpy, memset, marker } kind = kernel;
  std::string name;
  std::uint64_t start_ns = 0, end_ns = 0;
  std::uint32_t device = 0, stream = 0;  // marker: device unused
  std::uint32_t thread = 0;              // marker: CUPTI's thread id
};

class Cupti {
 public:
  static Cupti& get();              // enables the activity kinds (on first use, and after pause())
  static Cupti& instance();         // the same object, as it is (CUPTI's buffer callback: never re-enables)
  // Disables the activity kinds and drops every record held, until the next get(): a traced step keeps the
  // timed steps of later runs in the process free of CUPTI's overhead, as the first run's were.
  void pause();
  bool enabled() const { return enabled_; }
  const std::string& status() const { return status_; }  // why not enabled, or which kinds
  bool markers() const { return markers_; }
  static std::uint64_t now_ns();    // cuptiGetTimestamp (0 when CUPTI is off)
  // Flushes CUPTI and moves out the records of one device (kernels, copies) plus all markers
  // that started in [from_ns, to_ns].
  std::vector<ActivityRecord> take(std::uint32_t device, std::uint64_t from_ns, std::uint64_t to_ns);
  void add(ActivityRecord r);       // called from CUPTI's buffer callback

 private:
  Cupti();
  bool set_kinds(bool on);          // (dis)ables the kinds enabled_ / markers_ name; false when CUPTI refused
  bool enabled_ = false, markers_ = false;
  std::atomic<bool> active_{false};
  std::mutex toggle_mu_;            // get() / pause() from several threads; never held with mu_ (add() takes mu_)
  std::string status_;
  std::mutex mu_;
  std::vector<ActivityRecord> records_;
};

std::string short_kernel_name(const char* mangled);  // demangled, without parameters, <= 96 chars

// Length of the union of [start, end) intervals (ns), in seconds: the GPU busy time of a set of records.
double busy_s(std::vector<std::pair<std::uint64_t, std::uint64_t>> iv);

}  // namespace ulysses::runtime::cuda
