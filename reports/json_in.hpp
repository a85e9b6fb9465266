#pragma once
// Reading JSON inputs (stored validation/capacity/step records, calibration raw files) with the
// YAML loaders' error convention: every bad input is ONE InputError "file: key: rule" (exit 2),
// never a raw nlohmann exception. Keys are dotted paths with list indices: cases[2].phases[0].name.
//
// Limits, checked in one linear pass before parsing (docs/INPUTS.md "Fuzzing and sanitizers"):
// nesting deeper than kMaxJsonDepth, and objects with more than kMaxJsonKeys keys (ordered_json
// inserts each key with a linear search: a huge object would take quadratic time).
#include <cstddef>
#include <cstdint>
#include <string>

#include "reports/json_out.hpp"

namespace ulysses::reports {

inline constexpr int kMaxJsonDepth = 64;
inline constexpr std::size_t kMaxJsonKeys = 4096;

// Parses text; InputError(file, "file", ...) on a syntax error or a limit above.
Json parse_json_text(const std::string& text, const std::string& file);
// Reads and parses a file; InputError(path, open_key, "cannot open ...") when it cannot be read.
Json read_json_file(const std::string& path, const std::string& open_key = "file");

// A value inside a parsed document and its key, for typed access with one-line errors.
class JsonIn {
 public:
  JsonIn(const Json& j, std::string file, std::string key = "") : j_(&j), file_(std::move(file)), key_(std::move(key)) {}
  const Json& json() const { return *j_; }
  const std::string& file() const { return file_; }
  const std::string& key() const { return key_; }
  [[noreturn]] void fail(const std::string& rule) const;

  bool has(const std::string& k) const;          // an object holding k (null included: readers' value() needs a type)
  JsonIn at(const std::string& k) const;         // needs an object holding k: "missing required key"
  JsonIn at(std::size_t i) const;                // needs an array longer than i
  const Json& object() const;                    // "must be an object"
  const Json& array(std::size_t min_size = 0) const;  // "must be a list" (of at least min_size)

  std::string str() const;                       // "must be text"
  bool boolean() const;                          // "must be true or false"
  double number() const;                         // any finite number
  double number_in(double lo, bool lo_open, double hi, bool hi_open, const std::string& what) const;
  // An integer in [lo, hi]; a float is accepted only when it is integral (no silent truncation).
  std::int64_t integer(std::int64_t lo, std::int64_t hi) const;

  // Optional keys: the default when absent, else the typed value (errors as above).
  std::string str_or(const std::string& k, const std::string& def) const;
  std::int64_t integer_or(const std::string& k, std::int64_t def, std::int64_t lo, std::int64_t hi) const;

 private:
  const Json* j_;
  std::string file_, key_;
};

}  // namespace ulysses::reports
