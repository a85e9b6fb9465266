// Stored records of validate and capacity read and checked once (eval/record_in.hpp).
#include "eval/record_in.hpp"

#include <filesystem>
#include <system_error>

#include <fmt/format.h>

#include "reports/json_in.hpp"
#include "core/errors.hpp"
#include "core/phases.hpp"

namespace ulysses::eval {

namespace {

// The fields the `--stored` commands read (eval/block_validation.cpp, block_capacity.cpp, step_record.cpp,
// step_capacity_record.cpp), checked once here: a missing key or a wrong type is one
// line naming the file and the key (the readers then find what they expect).
constexpr std::int64_t kMaxRecordBytes = std::int64_t{1} << 53;  // exact in a double
constexpr std::int64_t kMaxRecordS = std::int64_t{1} << 40;

// Every field of a stored step measurement that measurement_from_json (runtime/step_measurement.cpp) reads.
void check_step_measurement(const reports::JsonIn& m) {
  constexpr std::int64_t kMaxBytes = std::int64_t{1} << 53;  // exact in a double
  constexpr double kMaxS = 1e7;
  m.object();
  for (const char* k : {"device", "pytorch_cuda_alloc_conf", "peak_at"})
    if (m.has(k)) m.at(k).str();
  if (m.has("versions")) m.at("versions").object();
  if (m.has("ranks")) m.at("ranks").integer(1, 1 << 20);
  for (const char* k : {"layers", "seq_len"})
    if (m.has(k)) m.at(k).integer(0, std::int64_t{1} << 40);
  for (const char* k : {"device_used_bytes", "host_rss_bytes", "host_rss_peak_bytes", "checkpoint_pinned_bytes"})
    if (m.has(k)) m.at(k).integer(0, kMaxBytes);
  if (m.has("wall_s")) m.at("wall_s").number_in(0, false, kMaxS, false, "a time in seconds >= 0");
  if (m.has("losses")) {
    const reports::JsonIn l = m.at("losses");
    l.array();
    for (std::size_t i = 0; i < l.json().size(); ++i)
      if (!l.json()[i].is_null()) l.at(i).number();  // null: a non-finite loss
  }
  const reports::JsonIn ph = m.at("phases");
  ph.array();
  for (std::size_t i = 0; i < ph.json().size(); ++i) {
    const reports::JsonIn p = ph.at(i);
    p.at("name").str();
    p.at("median_s").number_in(0, false, kMaxS, false, "a time in seconds >= 0");
    for (const char* k : {"min_s", "max_s"})
      if (p.has(k)) p.at(k).number_in(0, false, kMaxS, false, "a time in seconds >= 0");
    if (p.has("kernel_s")) p.at("kernel_s").number_in(-1, false, kMaxS, false, "a time in seconds >= 0 (or -1: not traced)");
    if (p.has("sm_mhz") || p.has("sm_samples")) {  // both, or neither
      p.at("sm_mhz").number_in(0, true, 100000, true, "a clock in MHz > 0");
      p.at("sm_samples").integer(1, std::int64_t{1} << 40);
    }
    for (const char* k : {"alloc_start_bytes", "peak_bytes", "peak_reserved_bytes"})
      if (p.has(k)) p.at(k).integer(0, kMaxBytes);
  }
  const reports::JsonIn step = m.at("step_s");
  step.at("median").number_in(0, true, kMaxS, false, "a time in seconds > 0");
  for (const char* k : {"min", "max"})
    if (step.has(k)) step.at(k).number_in(0, false, kMaxS, false, "a time in seconds >= 0");
  m.at("max_memory_allocated").integer(1, kMaxBytes);
  m.at("max_memory_reserved").integer(0, kMaxBytes);
}

void check_case_keys(const reports::JsonIn& c) {
  c.at("name").str();
  const reports::JsonIn keys = c.at("keys");
  keys.array();
  for (std::size_t k = 0; k < keys.json().size(); ++k) {
    const reports::JsonIn kv = keys.at(k);
    if (!kv.json().is_array() || kv.json().size() != 2) kv.fail("must be a [key, value] pair of text");
    kv.at(0).str(), kv.at(1).str();
  }
}

void check_block_case(const reports::JsonIn& c) {
  const reports::JsonIn ph = c.at("phases");
  ph.array(6);
  for (std::size_t k = 0; k < 6; ++k) {
    const reports::JsonIn p = ph.at(k);
    if (p.at("name").str() != core::kBlockPhaseNames[k])
      p.at("name").fail(fmt::format("must be '{}' (the six block phases in order)", core::kBlockPhaseNames[k]));
    p.at("measured_s").number_in(0, true, 1e6, false, "a time in seconds > 0");
    for (const char* opt : {"measured_min_s", "measured_max_s"})
      if (p.has(opt)) p.at(opt).number_in(0, false, 1e6, false, "a time in seconds >= 0");
  }
  c.at("peak_memory").at("measured_bytes").integer(1, kMaxRecordBytes);
  c.at("correct").boolean();
}

void check_capacity_case(const reports::JsonIn& c, bool step) {
  c.at("measured_S").integer(0, kMaxRecordS);
  if (step && c.has("first_oom_S")) c.at("first_oom_S").integer(0, kMaxRecordS);
}

}  // namespace

Keys stored_keys(const reports::Json& c) {
  Keys keys;
  for (const auto& kv : c.at("keys")) keys.emplace_back(kv.at(0).get<std::string>(), kv.at(1).get<std::string>());
  return keys;
}

StoredProfile stored_profile(const reports::Json& rec, const std::string& path) {
  const std::string set_profile = rec.value("profile", "");
  const std::string used = rec.value("profile_used", "");
  if (used.empty() || used == set_profile) return {set_profile, ""};
  // a preset name or an inline map is taken as it is (an unknown preset or a broken file then fails the
  // re-prediction with its own one line, as --profile would); only a file that is not here falls back
  const std::filesystem::path p(used);
  const bool path_like = used.front() != '{' && (used.find('/') != std::string::npos || p.extension() == ".yaml" ||
                                                 p.extension() == ".yml");
  const std::filesystem::path beside = std::filesystem::path(path).parent_path() / p;
  std::error_code ec;
  if (!path_like || std::filesystem::is_regular_file(p, ec) || (p.is_relative() && std::filesystem::is_regular_file(beside, ec)))
    return {used, ""};
  if (set_profile.empty())
    throw core::InputError(path, "profile_used", "names a file not found here (" + used +
                                                     ") and the record names no set profile: give --profile");
  return {set_profile, fmt::format("{}: profile_used {} is a file not found here (a path on the machine that measured?); "
                                   "re-predicted with the set's profile {}",
                                   path, used, set_profile)};
}

reports::Json load_record(const std::string& path, const std::string& producer) {
  const reports::Json j = reports::read_json_file(path, "--stored");
  const reports::JsonIn r(j, path);
  if (!j.is_object()) r.fail("is not a JSON object: not a record of `" + producer + "`");
  for (const char* k : {"format", "model", "profile", "profile_used", "backend", "device", "measured_at", "set_name"})
    if (r.has(k)) r.at(k).str();
  if (!r.has("cases") || !j["cases"].is_array() || j["cases"].empty())
    throw core::InputError(path, "cases", "missing or empty: not a record of `" + producer + "`");
  r.integer_or("granularity", 1024, 1, std::int64_t{1} << 24);
  const std::string format = r.str_or("format", "");
  const bool capacity = producer.find("capacity") != std::string::npos;
  const bool step = format == (capacity ? "ulysses-step-capacity/1" : "ulysses-step-validation/1");
  const reports::JsonIn cases = r.at("cases");
  for (std::size_t i = 0; i < j["cases"].size(); ++i) {
    const reports::JsonIn c = cases.at(i);
    c.object();
    check_case_keys(c);
    if (capacity) check_capacity_case(c, step);
    else if (step) check_step_measurement(c.at("measured"));
    else check_block_case(c);
  }
  return j;
}

}  // namespace ulysses::eval
