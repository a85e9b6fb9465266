// The sweep engine (sim/sweep.hpp): the cartesian product of a spec's axes on all cores, rows in point
// order, a stop flag, and the rule for sweep names.
#include "sim/sweep.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "sim/capacity.hpp"
#include "sim/config_internal.hpp"
#include "core/errors.hpp"
#include "sim/predict.hpp"

namespace ulysses {

std::int64_t sweep_points(const SweepSpec& spec) {
  std::int64_t n = 1;
  for (const auto& a : spec.axes) {
    if (a.values.empty()) throw core::InputError(spec.path, "axes." + a.key, "an axis needs at least one value");
    if (n > (std::int64_t{1} << 40) / static_cast<std::int64_t>(a.values.size()))
      throw core::InputError(spec.path, "axes", "more than 2^40 points");
    n *= static_cast<std::int64_t>(a.values.size());
  }
  return n;
}

std::string sweep_name_rule(const std::string& name) {
  constexpr std::size_t kMaxName = 128;
  if (name.empty()) return "must not be empty";
  for (const char c : name) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok) {
      std::string shown;  // the name as printable text, on one line, at most 60 characters
      for (const char d : name.substr(0, 60)) shown += (static_cast<unsigned char>(d) < 0x20 || d == 0x7f) ? '?' : d;
      return "may hold only letters, digits, '.', '_' and '-': it names the output files (got '" + shown +
             (name.size() > 60 ? "...')" : "')");
    }
  }
  if (name[0] == '.') return "must not start with '.' (got '" + name.substr(0, 60) + "')";
  if (name.size() > kMaxName) return "must be at most " + std::to_string(kMaxName) + " characters (got " + std::to_string(name.size()) + ")";
  return "";
}

void check_sweep_name(const SweepSpec& spec) {
  const std::string rule = sweep_name_rule(spec.name);
  if (rule.empty()) return;
  const bool from_stem = spec.name == stem_of(spec.path);
  throw core::InputError(spec.path, "name", rule + (from_stem ? " (without `name:` the name is the file stem)" : ""));
}

void sort_skipped(std::vector<std::pair<std::string, std::int64_t>>& skipped) {
  std::sort(skipped.begin(), skipped.end(),
            [](const auto& a, const auto& b) { return a.second != b.second ? a.second > b.second : a.first < b.first; });
}

Shard parse_shard(const std::string& text, const std::string& key) {
  const auto slash = text.find('/');
  auto number = [&](const std::string& part, std::int64_t& out) {
    if (part.empty() || part.size() > 7 || part.find_first_not_of("0123456789") != std::string::npos) return false;
    out = std::stoll(part);
    return true;
  };
  Shard s;
  const bool ok = slash != std::string::npos && number(text.substr(0, slash), s.index) &&
                  number(text.substr(slash + 1), s.count) && s.count >= 1 && s.count <= kMaxShards &&
                  s.index >= 1 && s.index <= s.count;
  if (!ok)
    throw core::InputError("", key, fmt::format("must be K/N with 1 <= K <= N <= {} (the K-th of N slices, e.g. 2/8; got '{}')",
                                          kMaxShards, text.size() > 40 ? text.substr(0, 40) + "..." : text));
  return s;
}

std::pair<std::int64_t, std::int64_t> shard_points(std::int64_t total, Shard s) {
  const std::int64_t base = total / s.count, extra = total % s.count, k = s.index - 1;  // the first `extra` get one more
  const std::int64_t first = k * base + std::min(k, extra);
  return {first, first + base + (k < extra ? 1 : 0)};
}

std::string sweep_spec_text(const SweepSpec& spec) {
  std::string t = fmt::format("name: {}\nmode: {}\ngranularity: {}\naxes:\n", quote(spec.name), spec.mode, spec.granularity);
  for (const auto& a : spec.axes) {
    t += fmt::format("  - key: {}\n    values:\n", quote(a.key));
    for (const auto& v : a.values) t += fmt::format("      - {}\n", quote(v));
  }
  return t + "base:\n" + to_yaml(spec.base);
}

namespace {

struct WorkerStats {
  std::int64_t valid = 0;
  std::unordered_map<std::string, std::int64_t> skipped;
};

// Shared state between the workers and the writer (the calling thread). Finished chunks wait in
// a window of `slots` (chunk c in slot c % slots) until the writer takes them in order, so memory
// stays bounded however large the sweep.
struct Chunks {
  std::int64_t count = 0;
  std::int64_t size = 0;
  std::atomic<std::int64_t> next{0};
  std::int64_t written = 0;              // chunks handed to the sink so far
  std::vector<std::string> text;         // per slot
  std::vector<std::int64_t> ready;       // per slot: chunk id + 1 when filled, else 0
  std::mutex mu;
  std::condition_variable cv;
  std::exception_ptr error;
  bool failed = false;
};

// Presets of "model" / "profile" axes, loaded once (set_key would read the YAML per point).
struct Preloaded {
  std::vector<std::vector<ModelSpec>> models;         // per axis (empty unless key == "model")
  std::vector<std::vector<HardwareProfile>> profiles; // per axis (empty unless key == "profile")
};

// One worker's axis values as plain scalars (what set_key makes of its text) and their error
// context, built once; the values were already checked by preload(), so the worker calls
// set_scalar directly.
struct AxisSetters {
  std::vector<Where> where;                 // per axis
  std::vector<std::vector<Scalar>> values;  // per axis, per value
  explicit AxisSetters(const SweepSpec& spec) {
    for (const auto& a : spec.axes) {
      where.push_back(Where{spec.path, a.key, dir_of(spec.path)});
      values.emplace_back();
      for (const auto& v : a.values) values.back().push_back(Scalar{v, false});
    }
  }
};

void apply_axis(Scenario& sc, const SweepSpec& spec, const Preloaded& pre, const AxisSetters& set, std::size_t a,
                std::int32_t v) {
  const auto i = static_cast<std::size_t>(v);
  if (!pre.models[a].empty()) sc.model = pre.models[a][i];
  else if (!pre.profiles[a].empty()) sc.hw = pre.profiles[a][i];
  else set_scalar(sc, spec.axes[a].key, set.values[a][i], set.where[a]);
}

// Applies every value of every axis once to the base (a bad value fails here, on the calling
// thread) and keeps the loaded presets.
Preloaded preload(const SweepSpec& spec) {
  Preloaded pre;
  pre.models.resize(spec.axes.size());
  pre.profiles.resize(spec.axes.size());
  for (std::size_t a = 0; a < spec.axes.size(); ++a) {
    Scenario probe = spec.base;
    for (const auto& value : spec.axes[a].values) {
      set_key(probe, spec.axes[a].key, value, spec.path);
      if (spec.axes[a].key == "model") pre.models[a].push_back(probe.model);
      if (spec.axes[a].key == "profile") pre.profiles[a].push_back(probe.hw);
    }
  }
  return pre;
}

void worker(const SweepSpec& spec, const SweepOptions& opt, const Preloaded& pre, std::int64_t first_point,
            std::int64_t end_point, Chunks& ch, WorkerStats& st) {
  const std::size_t n_axes = spec.axes.size();
  Scenario sc = spec.base;
  const AxisSetters setters(spec);
  std::vector<std::int32_t> idx(n_axes, 0), applied(n_axes, -1);
  SweepPoint pt;
  pt.scenario = &sc;
  pt.value_index = idx.data();
  std::string out;
  try {
    for (std::int64_t c; (c = ch.next.fetch_add(1)) < ch.count;) {
      if (opt.stop && opt.stop->load() != 0) break;
      const std::int64_t begin = first_point + c * ch.size, end = std::min(end_point, begin + ch.size);
      std::int64_t rest = begin;  // mixed radix, last axis fastest
      for (std::size_t a = n_axes; a-- > 0;) {
        const auto n = static_cast<std::int64_t>(spec.axes[a].values.size());
        idx[a] = static_cast<std::int32_t>(rest % n);
        rest /= n;
      }
      out.clear();
      for (std::int64_t i = begin; i < end; ++i) {
        std::size_t first = 0;
        while (first < n_axes && idx[first] == applied[first]) ++first;
        for (std::size_t a = first; a < n_axes; ++a) {
          apply_axis(sc, spec, pre, setters, a, idx[a]);
          applied[a] = idx[a];
        }

        pt.index = i;
        const std::string reason = check(sc);
        pt.valid = reason.empty();
        pt.reason = reason;
        if (pt.valid) {
          ++st.valid;
          if (spec.mode == "plan") {
            const CapacityResult r = find_max_seq_len(sc, spec.granularity);
            pt.prediction = &r.at_max;
            pt.seq_len = r.max_seq_len;
            pt.binding = r.binding;
            pt.fits = r.max_seq_len > 0;
            opt.row(pt, out);
          } else {
            const Prediction p = predict(sc);
            pt.prediction = &p;
            pt.seq_len = p.seq_len;
            pt.fits = p.fits_gpu && p.fits_host;
            pt.binding = !p.fits_gpu ? Binding::gpu_hbm : !p.fits_host ? Binding::host_ram : Binding::none;
            opt.row(pt, out);
          }
        } else {
          ++st.skipped[reason];
          pt.prediction = nullptr;
          pt.seq_len = 0;
          pt.fits = false;
          pt.binding = Binding::none;
          opt.row(pt, out);
        }
        for (std::size_t a = n_axes; a-- > 0;) {  // odometer step
          if (++idx[a] < static_cast<std::int32_t>(spec.axes[a].values.size())) break;
          idx[a] = 0;
        }
      }
      std::unique_lock lk(ch.mu);
      const auto slots = static_cast<std::int64_t>(ch.text.size());
      ch.cv.wait(lk, [&] { return c - ch.written < slots || ch.failed; });
      if (ch.failed) break;
      const auto slot = static_cast<std::size_t>(c % slots);
      ch.text[slot].swap(out);
      ch.ready[slot] = c + 1;
      ch.cv.notify_all();
    }
  } catch (...) {
    std::lock_guard lk(ch.mu);
    if (!ch.error) ch.error = std::current_exception();
    ch.failed = true;
    ch.next = ch.count;
    ch.cv.notify_all();
  }
}

}  // namespace

SweepStats run_sweep(const SweepSpec& spec, const SweepOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::int64_t total = sweep_points(spec);
  const Preloaded pre = preload(spec);
  if (spec.mode != "predict" && spec.mode != "plan")
    throw core::InputError(spec.path, "mode", "'" + spec.mode + "' is not one of predict, plan");

  const std::int64_t first = opt.first, end = opt.end < 0 ? total : opt.end;
  if (first < 0 || first > end || end > total) throw std::invalid_argument("run_sweep: point range outside the product");
  const std::int64_t count = end - first;
  SweepStats stats;
  stats.points = count;
  Chunks ch;
  ch.size = std::max<std::int64_t>(1, opt.chunk);
  ch.count = (count + ch.size - 1) / ch.size;
  int threads = opt.threads > 0 ? opt.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = static_cast<int>(std::min<std::int64_t>(threads, std::max<std::int64_t>(ch.count, 1)));
  stats.threads = threads;
  const auto slots = static_cast<std::size_t>(std::min<std::int64_t>(std::max<std::int64_t>(ch.count, 1), 8 * threads));
  ch.text.resize(slots);
  ch.ready.assign(slots, 0);

  std::vector<WorkerStats> wstats(static_cast<std::size_t>(threads));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back(worker, std::cref(spec), std::cref(opt), std::cref(pre), first, end, std::ref(ch),
                      std::ref(wstats[static_cast<std::size_t>(t)]));

  std::int64_t done = 0;
  try {
    for (std::int64_t c = 0; c < ch.count; ++c) {
      std::string text;
      const std::size_t slot = static_cast<std::size_t>(c) % slots;
      {
        std::unique_lock lk(ch.mu);
        while (ch.ready[slot] != c + 1 && !ch.failed) {
          if (opt.stop && opt.stop->load() != 0) break;
          ch.cv.wait_for(lk, std::chrono::milliseconds(100));
          if (opt.progress && ch.ready[slot] != c + 1) {
            lk.unlock();
            opt.progress(done, count);
            lk.lock();
          }
        }
        if (ch.failed || (opt.stop && opt.stop->load() != 0)) break;
        text.swap(ch.text[slot]);
        ch.ready[slot] = 0;
        ch.written = c + 1;
        ch.cv.notify_all();
      }
      if (opt.sink) opt.sink(text);
      done = std::min(count, (c + 1) * ch.size);
      if (opt.progress) opt.progress(done, count);
    }
  } catch (...) {  // the sink or progress callback failed: stop the workers, then rethrow
    {
      std::lock_guard lk(ch.mu);
      ch.failed = true;
      ch.next = ch.count;
      ch.cv.notify_all();
    }
    for (auto& t : pool) t.join();
    throw;
  }
  const int stopped = opt.stop ? opt.stop->load() : 0;
  if (stopped != 0) {  // wake the workers waiting for a slot, let them see the flag
    std::lock_guard lk(ch.mu);
    ch.failed = true;
    ch.next = ch.count;
    ch.cv.notify_all();
  }
  for (auto& t : pool) t.join();
  if (stopped != 0) throw SweepStopped(stopped);
  if (ch.error) std::rethrow_exception(ch.error);

  std::unordered_map<std::string, std::int64_t> skipped;
  for (const auto& w : wstats) {
    stats.valid += w.valid;
    for (const auto& [r, n] : w.skipped) skipped[r] += n;
  }
  stats.skipped.assign(skipped.begin(), skipped.end());
  sort_skipped(stats.skipped);
  stats.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stats.points_per_s = stats.elapsed_s > 0 ? static_cast<double>(count) / stats.elapsed_s : 0;
  return stats;
}

}  // namespace ulysses
