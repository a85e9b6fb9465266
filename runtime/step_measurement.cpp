// runtime/step_measurement.hpp: a whole step's measurement to JSON and back.
#include "runtime/step_measurement.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ulysses::runtime {

std::vector<double> step_losses_of(const Json& j) {
  std::vector<double> out;
  for (const auto& l : j.value("losses", Json::array()))
    out.push_back(l.is_number() ? l.get<double>() : std::numeric_limits<double>::quiet_NaN());
  return out;
}


bool StepMeasurement::correct() const {
  return !losses.empty() && std::all_of(losses.begin(), losses.end(), [](double l) { return std::isfinite(l); }) &&
         std::all_of(checks.begin(), checks.end(), [](const StepCheck& c) { return c.wrong == 0 && c.elements > 0; });
}

Json measurement_json(const StepMeasurement& m) {
  Json j;
  j["backend"] = m.backend;
  j["scope"] = "step";
  j["device"] = m.device;
  j["ranks"] = m.ranks;
  j["versions"] = m.versions;
  j["pytorch_cuda_alloc_conf"] = m.alloc_conf;
  j["layers"] = m.layers;
  j["seq_len"] = m.seq_len;
  const auto device_bytes = [&](std::int64_t b) { return m.has_device_memory() ? Json(b) : Json(nullptr); };
  j["phases"] = Json::array();
  for (const auto& p : m.phases) {
    Json e{{"name", p.name},
           {"median_s", p.median_s},
           {"min_s", p.min_s},
           {"max_s", p.max_s},
           {"alloc_start_bytes", device_bytes(p.alloc_start_bytes)},
           {"peak_bytes", device_bytes(p.peak_bytes)},
           {"peak_reserved_bytes", device_bytes(p.peak_reserved_bytes)}};
    if (p.kernel_s >= 0) e["kernel_s"] = p.kernel_s;
    if (p.host_s >= 0) e["host_s"] = p.host_s;
    if (p.sm_mhz > 0 && p.sm_samples > 0) e["sm_mhz"] = p.sm_mhz, e["sm_samples"] = p.sm_samples;
    j["phases"].push_back(e);
  }
  j["step_s"] = {{"median", m.step_median_s}, {"min", m.step_min_s}, {"max", m.step_max_s}};
  j["max_memory_allocated"] = device_bytes(m.max_memory_allocated);
  j["max_memory_reserved"] = device_bytes(m.max_memory_reserved);
  j["peak_at"] = m.peak_at;
  j["device_used_bytes"] = device_bytes(m.device_used_bytes);
  j["host_rss_bytes"] = m.host_rss_bytes;
  j["host_rss_peak_bytes"] = m.host_rss_peak_bytes;
  j["checkpoint_pinned_bytes"] = m.pinned_bytes;
  j["losses"] = m.losses;  // a NaN is written as null
  if (!m.checks.empty()) {
    j["checks"] = Json::array();
    for (const auto& c : m.checks)
      j["checks"].push_back({{"name", c.name}, {"elements", c.elements}, {"wrong", c.wrong},
                             {"max_rel_err", std::isfinite(c.max_rel_err) ? Json(c.max_rel_err) : Json(nullptr)},  // inf: null
                             {"tolerance", c.tolerance}});
  }
  j["correct"] = m.correct();
  j["wall_s"] = m.wall_s;
  j["energy_j_per_step"] = m.energy_j_per_step >= 0 ? Json(m.energy_j_per_step) : Json(nullptr);
  return j;
}

StepMeasurement measurement_from_json(const Json& j) {
  StepMeasurement m;
  // a byte count, or -1 where the measurement has no device (null)
  const auto bytes_at = [](const Json& o, const char* key) {
    return !o.contains(key) ? std::int64_t{0} : o.at(key).is_null() ? std::int64_t{-1} : o.at(key).get<std::int64_t>();
  };
  m.backend = j.value("backend", "deepspeed");
  m.device = j.value("device", "");
  m.alloc_conf = j.value("pytorch_cuda_alloc_conf", "");
  m.versions = j.value("versions", Json::object());
  m.ranks = j.value("ranks", 1);
  m.layers = j.value("layers", std::int64_t{0});
  m.seq_len = j.value("seq_len", std::int64_t{0});
  for (const auto& p : j.at("phases")) {
    StepPhase s;
    s.name = p.at("name").get<std::string>();
    s.median_s = p.at("median_s").get<double>();
    s.min_s = p.value("min_s", 0.0), s.max_s = p.value("max_s", 0.0), s.kernel_s = p.value("kernel_s", -1.0);
    s.host_s = p.value("host_s", -1.0);
    s.sm_mhz = p.value("sm_mhz", -1.0), s.sm_samples = p.value("sm_samples", std::int64_t{0});
    s.alloc_start_bytes = bytes_at(p, "alloc_start_bytes");
    s.peak_bytes = bytes_at(p, "peak_bytes");
    s.peak_reserved_bytes = bytes_at(p, "peak_reserved_bytes");
    m.phases.push_back(s);
  }
  m.step_median_s = j.at("step_s").at("median").get<double>();
  m.step_min_s = j.at("step_s").value("min", 0.0), m.step_max_s = j.at("step_s").value("max", 0.0);
  m.max_memory_allocated = j.at("max_memory_allocated").is_null() ? -1 : j.at("max_memory_allocated").get<std::int64_t>();
  m.max_memory_reserved = j.at("max_memory_reserved").is_null() ? -1 : j.at("max_memory_reserved").get<std::int64_t>();
  m.peak_at = j.value("peak_at", "");
  m.device_used_bytes = bytes_at(j, "device_used_bytes");
  m.host_rss_bytes = j.value("host_rss_bytes", std::int64_t{0});
  m.host_rss_peak_bytes = j.value("host_rss_peak_bytes", std::int64_t{0});
  m.pinned_bytes = j.value("checkpoint_pinned_bytes", std::int64_t{0});
  m.losses = step_losses_of(j);
  for (const auto& c : j.value("checks", Json::array()))
    m.checks.push_back({c.at("name").get<std::string>(), c.at("elements").get<std::int64_t>(), c.at("wrong").get<std::int64_t>(),
                        c.at("max_rel_err").is_null() ? INFINITY : c.at("max_rel_err").get<double>(), c.at("tolerance").get<double>()});
  m.wall_s = j.value("wall_s", 0.0);
  m.energy_j_per_step = j.contains("energy_j_per_step") && j.at("energy_j_per_step").is_number()
                            ? j.at("energy_j_per_step").get<double>() : -1.0;
  return m;
}

}  // namespace ulysses::runtime
