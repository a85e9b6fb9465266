// Reading JSON inputs with one-line InputErrors (reports/json_in.hpp).
#include "reports/json_in.hpp"

#include <cmath>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "core/errors.hpp"

namespace ulysses::reports {

namespace {

const char* kind_of(const Json& j) {
  switch (j.type()) {
    case Json::value_t::object: return "an object";
    case Json::value_t::array: return "a list";
    case Json::value_t::string: return "text";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::null: return "null";
    case Json::value_t::discarded: return "nothing";
    default: return "a number";
  }
}

// One pass over the text outside strings: the nesting depth and the number of members of each
// object (commas at its level), so that neither the parser nor what walks the result later
// (recursive copies, dumps) meets an input that is too deep or too wide.
void check_limits(const std::string& text, const std::string& file) {
  struct Level {
    bool object;
    std::size_t members;
  };
  std::vector<Level> stack;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (stack.size() >= static_cast<std::size_t>(kMaxJsonDepth))
        throw core::InputError(file, "file", fmt::format("JSON nested deeper than {} levels", kMaxJsonDepth));
      stack.push_back({c == '{', 1});
    } else if (c == '}' || c == ']') {
      if (!stack.empty()) stack.pop_back();
    } else if (c == ',' && !stack.empty() && stack.back().object) {
      if (++stack.back().members > kMaxJsonKeys)
        throw core::InputError(file, "file", fmt::format("a JSON object with more than {} keys", kMaxJsonKeys));
    }
  }
}

std::string one_line(std::string s, std::size_t max) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  if (s.size() > max) s = s.substr(0, max) + "...";
  return s;
}

}  // namespace

Json parse_json_text(const std::string& text, const std::string& file) {
  check_limits(text, file);
  try {
    return Json::parse(text);
  } catch (const Json::exception& e) {  // parse errors, and numbers past double's range (out_of_range 406)
    std::string msg = e.what();
    if (const auto p = msg.find("] "); msg.rfind("[json.exception", 0) == 0 && p != std::string::npos) msg = msg.substr(p + 2);
    throw core::InputError(file, "file", "is not JSON (" + one_line(msg, 200) + ")");
  }
}

Json read_json_file(const std::string& path, const std::string& open_key) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw core::InputError(path, open_key, "cannot open the file");
  std::stringstream ss;
  ss << f.rdbuf();
  if (f.bad()) throw core::InputError(path, open_key, "cannot read the file");
  return parse_json_text(ss.str(), path);
}

void JsonIn::fail(const std::string& rule) const { throw core::InputError(file_, key_.empty() ? "file" : key_, rule); }

bool JsonIn::has(const std::string& k) const { return j_->is_object() && j_->contains(k); }

JsonIn JsonIn::at(const std::string& k) const {
  const Json& o = object();
  const std::string key = key_.empty() ? k : key_ + "." + k;
  const auto it = o.find(k);
  if (it == o.end()) throw core::InputError(file_, key, "missing required key");
  return JsonIn(*it, file_, key);
}

JsonIn JsonIn::at(std::size_t i) const {
  const Json& a = array();
  const std::string key = fmt::format("{}[{}]", key_, i);
  if (i >= a.size()) throw core::InputError(file_, key, "missing (the list is too short)");
  return JsonIn(a[i], file_, key);
}

const Json& JsonIn::object() const {
  if (!j_->is_object()) fail(fmt::format("must be an object (got {})", kind_of(*j_)));
  return *j_;
}

const Json& JsonIn::array(std::size_t min_size) const {
  if (!j_->is_array()) fail(fmt::format("must be a list (got {})", kind_of(*j_)));
  if (j_->size() < min_size) fail(fmt::format("must be a list of at least {} (got {})", min_size, j_->size()));
  return *j_;
}

std::string JsonIn::str() const {
  if (!j_->is_string()) fail(fmt::format("must be text (got {})", kind_of(*j_)));
  return j_->get<std::string>();
}

bool JsonIn::boolean() const {
  if (!j_->is_boolean()) fail(fmt::format("must be true or false (got {})", kind_of(*j_)));
  return j_->get<bool>();
}

double JsonIn::number() const {
  if (!j_->is_number()) fail(fmt::format("must be a number (got {})", kind_of(*j_)));
  const double v = j_->get<double>();
  if (!std::isfinite(v)) fail("must be a finite number");
  return v;
}

double JsonIn::number_in(double lo, bool lo_open, double hi, bool hi_open, const std::string& what) const {
  if (!j_->is_number()) fail(fmt::format("must be {} (got {})", what, kind_of(*j_)));
  const double v = j_->get<double>();
  if (!std::isfinite(v) || (lo_open ? v <= lo : v < lo) || (hi_open ? v >= hi : v > hi))
    fail(fmt::format("must be {} (got {})", what, j_->dump()));
  return v;
}

std::int64_t JsonIn::integer(std::int64_t lo, std::int64_t hi) const {
  const std::string what = fmt::format("an integer in [{}, {}]", lo, hi);
  if (!j_->is_number()) fail(fmt::format("must be {} (got {})", what, kind_of(*j_)));
  std::int64_t v = 0;
  if (j_->is_number_unsigned()) {
    const std::uint64_t u = j_->get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(hi)) fail(fmt::format("must be {} (got {})", what, u));
    v = static_cast<std::int64_t>(u);
  } else if (j_->is_number_integer()) {
    v = j_->get<std::int64_t>();
  } else {
    const double d = j_->get<double>();
    // 2^63 is the first double above INT64_MAX: compare before converting (no UB)
    if (!std::isfinite(d) || d != std::floor(d) || d < -9223372036854775808.0 || d >= 9223372036854775808.0)
      fail(fmt::format("must be {} (got {})", what, j_->dump()));
    v = static_cast<std::int64_t>(d);
  }
  if (v < lo || v > hi) fail(fmt::format("must be {} (got {})", what, v));
  return v;
}

std::string JsonIn::str_or(const std::string& k, const std::string& def) const {
  return has(k) ? at(k).str() : def;
}

std::int64_t JsonIn::integer_or(const std::string& k, std::int64_t def, std::int64_t lo, std::int64_t hi) const {
  return has(k) ? at(k).integer(lo, hi) : def;
}

}  // namespace ulysses::reports
