#pragma once
// Internals shared by sim/config_*.cpp: strict scalar parsing, map walking with unknown-key
// suggestions, file loading and preset resolution, YAML text emission. Not a public API:
// include sim/config.hpp instead.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "core/errors.hpp"
#include "sim/limits.hpp"
#include "sim/scenario.hpp"

namespace ulysses {

// Where a value comes from: the file ("" = command line), the dotted key, and the directory
// that relative paths in it resolve against ("" = the current directory).
struct Where {
  std::string file;
  std::string key;
  std::string dir;
  [[noreturn]] void fail(const std::string& rule) const { throw core::InputError(file, key, rule); }
  Where child(const std::string& k) const { return {file, key.empty() ? k : key + "." + k, dir}; }
};

// A scalar as written. A quoted "8" is a string, not a number (YAML 1.2 core schema).
struct Scalar {
  std::string text;
  bool quoted = false;
};

// The scalar in n; fails with "must be <expected> (got a map|a list|nothing)" otherwise.
Scalar scalar_of(const YAML::Node& n, const Where& w, const std::string& expected);

// Typed parsing of one scalar. `what` is the phrase after "must be", e.g. "a positive integer".
std::int64_t parse_int(const Scalar& s, const Where& w, std::int64_t lo, std::int64_t hi, const std::string& what);
double parse_double(const Scalar& s, const Where& w, double lo, bool lo_open, double hi, bool hi_open,
                    const std::string& what);
bool parse_bool(const Scalar& s, const Where& w);
std::string parse_string(const Scalar& s, const Where& w);
std::string parse_choice(const Scalar& s, const Where& w, const std::vector<std::string>& choices);

// Convenience: the common rules.
inline std::int64_t positive_int(const Scalar& s, const Where& w) {
  return parse_int(s, w, 1, INT64_MAX, "a positive integer");
}
inline std::int64_t nonneg_int(const Scalar& s, const Where& w) {
  return parse_int(s, w, 0, INT64_MAX, "a non-negative integer");
}
inline double positive_number(const Scalar& s, const Where& w) {
  return parse_double(s, w, 0, true, 1e300, false, "a positive number");
}
inline double nonneg_number(const Scalar& s, const Where& w) {
  return parse_double(s, w, 0, false, 1e300, false, "a non-negative number");
}
// memory sizes in GiB: at most kMaxGiB (2^30 GiB), so that the byte count fits int64
inline double positive_gib(const Scalar& s, const Where& w) {
  return parse_double(s, w, 0, true, kMaxGiB, false, "a positive number of GiB, at most 2^30");
}
inline double nonneg_gib(const Scalar& s, const Where& w) {
  return parse_double(s, w, 0, false, kMaxGiB, false, "a non-negative number of GiB, at most 2^30");
}
inline double fraction(const Scalar& s, const Where& w) {  // efficiencies: (0, 1]
  return parse_double(s, w, 0, true, 1, false, "a fraction of peak in (0, 1]");
}

// The (key, value) pairs of a map in file order; fails unless n is a map, on duplicate keys and
// on keys that are not plain scalars. A null node (empty file, `plan:` with nothing) fails too.
std::vector<std::pair<std::string, YAML::Node>> map_items(const YAML::Node& n, const Where& w);
// Fails on the first key not in `known`, suggesting the closest known key.
void reject_unknown(const std::vector<std::pair<std::string, YAML::Node>>& items,
                    const std::vector<std::string>& known, const Where& w);
// Fails with "missing required key" naming w.child(key) unless one item has that key.
void require_keys(const std::vector<std::pair<std::string, YAML::Node>>& items,
                  const std::vector<std::string>& required, const Where& w);
std::string closest(const std::string& word, const std::vector<std::string>& candidates);  // "" if none close

// Loads a YAML file. Fails with key "file" when it cannot be read, "line L, column C" on syntax.
YAML::Node load_file(const std::string& path);
std::string read_text(const std::string& path);                       // fails like load_file
YAML::Node parse_text(const std::string& text, const std::string& path);  // path: for messages

// Resolves a preset name ("llama-3.1-8b" -> <repo>/<preset_dir>/llama-3.1-8b.yaml) or a path
// (contains '/' or ends in .yaml/.yml: relative to w.dir first, then the current directory).
// kind: "model" or "profile" (for messages). Fails listing the available presets.
std::string resolve(const std::string& name_or_path, const std::string& preset_dir, const std::string& kind,
                    const Where& w);
std::vector<std::string> preset_names(const std::string& preset_dir);  // sorted stems
std::string dir_of(const std::string& path);                            // "" for a bare file name
std::string stem_of(const std::string& path);

// Parse a whole model / profile map (file or inline). An inline map may start from a preset
// with `base: <name>`; otherwise every required key must be present.
ModelSpec parse_model(const YAML::Node& n, const Where& w, const std::string& default_name);
HardwareProfile parse_profile(const YAML::Node& n, const Where& w, const std::string& default_name);
Calibration parse_calibration(const YAML::Node& n, const Where& w);
// Hugging Face config.json (sim/config_hf.cpp). hf_config_file: the config.json a path names (a
// .json file, or a folder holding config.json; relative to w.dir first), "" when name_or_path has no
// '/' and no .json extension (a preset name: model_from_ref then tries a folder of that name when no
// preset has it). parse_hf_config: the model it describes; InputError naming the file and HF key.
std::string hf_config_file(const std::string& name_or_path, const Where& w);
ModelSpec parse_hf_config(const std::string& text, const std::string& path);
// Load a model/profile named by a scalar (preset or path) found at w. Cached per file.
ModelSpec model_from_ref(const std::string& name_or_path, const Where& w);
HardwareProfile profile_from_ref(const std::string& name_or_path, const Where& w);
// The value of a `model:` / `profile:` key: a scalar reference or an inline map.
ModelSpec model_from_node(const YAML::Node& n, const Where& w);
HardwareProfile profile_from_node(const YAML::Node& n, const Where& w);

// Setting one field of a model / profile / plan from a scalar; false if the key is unknown.
bool set_model_field(ModelSpec& m, const std::string& key, const Scalar& s, const Where& w);
bool set_profile_field(HardwareProfile& p, const std::string& key, const Scalar& s, const Where& w);
const std::vector<std::string>& model_keys();    // settable model keys, file order
const std::vector<std::string>& profile_keys();  // settable profile keys (without sources/calibrated)

// Scenarios: one key set from a node (scalar, or a map for model/profile), and a whole map.
// Keys of errors come from w (the sweep loader prefixes them with "base." or "axes.").
void set_value(Scenario& sc, const std::string& key, const YAML::Node& n, const Where& w);
void set_scalar(Scenario& sc, const std::string& key, const Scalar& s, const Where& w);
Scenario parse_scenario(const YAML::Node& root, const Where& w, const std::string& default_name);

// YAML text emission (block style, two-space indent), loadable by the parsers above.
std::string quote(const std::string& s);                // always a double-quoted YAML string
std::string number(double v);                           // shortest text that parses back to v
std::string scaled(double v, double scale);             // shortest t with parse(t) * scale == v
std::string model_yaml(const ModelSpec& m, int indent);
std::string profile_yaml(const HardwareProfile& p, int indent);
std::string calibration_yaml(const Calibration& c, int indent);  // the lines under `calibrated:`

// Scaled units: the file says GiB / TFLOP/s / microseconds; the structs hold bytes, FLOP/s, s.
inline constexpr double kUs = 1e-6;
core::bytes_t gib_to_bytes(double gib);
double bytes_to_gib(core::bytes_t b);
std::string gib_text(core::bytes_t b);  // shortest GiB text t with gib_to_bytes(parse(t)) == b

}  // namespace ulysses
