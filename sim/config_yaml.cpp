// Strict scalar parsing, map walking and YAML text helpers for the input loaders.
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_set>

#include <fmt/format.h>

#include "sim/config.hpp"
#include "sim/fs_query.hpp"
#include "sim/config_internal.hpp"

namespace ulysses {

namespace fs = std::filesystem;

namespace {

std::string kind_of(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: return "a map";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined: return "nothing";
    default: return "a scalar";
  }
}

// What the user wrote, for "(got ...)": quoted strings keep their quotes.
std::string shown(const Scalar& s) { return s.quoted ? "the string \"" + s.text + "\"" : s.text; }

bool is_integer_text(const std::string& t) {
  std::size_t i = (!t.empty() && (t[0] == '-' || t[0] == '+')) ? 1 : 0;
  if (i >= t.size()) return false;
  return std::all_of(t.begin() + static_cast<long>(i), t.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

Scalar scalar_of(const YAML::Node& n, const Where& w, const std::string& expected) {
  if (!n.IsScalar()) w.fail(fmt::format("must be {} (got {})", expected, kind_of(n)));
  return Scalar{n.Scalar(), n.Tag() == "!"};
}

std::int64_t parse_int(const Scalar& s, const Where& w, std::int64_t lo, std::int64_t hi, const std::string& what) {
  if (s.quoted || !is_integer_text(s.text)) w.fail(fmt::format("must be {} (got {})", what, shown(s)));
  std::int64_t v = 0;
  const char* first = s.text.data() + (s.text[0] == '+' ? 1 : 0);
  const auto [ptr, ec] = std::from_chars(first, s.text.data() + s.text.size(), v);
  if (ec != std::errc() || ptr != s.text.data() + s.text.size())
    w.fail(fmt::format("must be {} (got {}, out of range)", what, s.text));
  if (v < lo || v > hi) w.fail(fmt::format("must be {} (got {})", what, s.text));
  return v;
}

double parse_double(const Scalar& s, const Where& w, double lo, bool lo_open, double hi, bool hi_open,
                    const std::string& what) {
  const auto bad = [&] { w.fail(fmt::format("must be {} (got {})", what, shown(s))); };
  if (s.quoted || s.text.empty()) bad();
  // strtod also reads "inf", "nan" and hex; accept only decimal notation.
  for (char c : s.text)
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' || c == '-' || c == '+'))
      bad();
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.text.c_str(), &end);
  if (end != s.text.c_str() + s.text.size() || errno == ERANGE || !std::isfinite(v)) bad();
  if ((lo_open ? v <= lo : v < lo) || (hi_open ? v >= hi : v > hi)) bad();
  return v;
}

bool parse_bool(const Scalar& s, const Where& w) {
  if (!s.quoted) {
    if (s.text == "true" || s.text == "True" || s.text == "TRUE") return true;
    if (s.text == "false" || s.text == "False" || s.text == "FALSE") return false;
  }
  w.fail(fmt::format("must be true or false (got {})", shown(s)));
}

std::string parse_string(const Scalar& s, const Where& w) {
  (void)w;
  return s.text;
}

std::string parse_choice(const Scalar& s, const Where& w, const std::vector<std::string>& choices) {
  if (std::find(choices.begin(), choices.end(), s.text) == choices.end())
    w.fail(fmt::format("must be one of {} (got '{}')", join(choices), s.text));
  return s.text;
}

std::vector<std::pair<std::string, YAML::Node>> map_items(const YAML::Node& n, const Where& w) {
  if (!n.IsMap()) {
    const Where at = w.key.empty() ? Where{w.file, "file", w.dir} : w;  // the whole file
    at.fail(fmt::format("must be a map of keys (got {})", kind_of(n)));
  }
  std::vector<std::pair<std::string, YAML::Node>> items;
  std::unordered_set<std::string> seen;  // linear in the keys: a file of 80k keys is one pass (issue 17)
  for (auto it = n.begin(); it != n.end(); ++it) {
    if (!it->first.IsScalar()) w.fail("keys must be plain names (got " + kind_of(it->first) + " as a key)");
    const std::string k = it->first.Scalar();
    if (!seen.insert(k).second) w.child(k).fail(fmt::format("duplicate key (line {})", it->first.Mark().line + 1));
    items.emplace_back(k, it->second);
  }
  return items;
}

std::string closest(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_d = SIZE_MAX;
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(word, c);
    if (d < best_d) best_d = d, best = c;
  }
  const std::size_t limit = std::max<std::size_t>(2, word.size() / 3);
  return best_d <= limit ? best : "";
}

void reject_unknown(const std::vector<std::pair<std::string, YAML::Node>>& items,
                    const std::vector<std::string>& known, const Where& w) {
  for (const auto& [k, _] : items) {
    if (std::find(known.begin(), known.end(), k) != known.end()) continue;
    const std::string near = closest(k, known);
    if (!near.empty()) w.child(k).fail(fmt::format("unknown key (did you mean '{}'?)", near));
    w.child(k).fail(fmt::format("unknown key (known keys here: {})", join(known)));
  }
}

void require_keys(const std::vector<std::pair<std::string, YAML::Node>>& items,
                  const std::vector<std::string>& required, const Where& w) {
  for (const auto& r : required) {
    const bool found = std::any_of(items.begin(), items.end(), [&](const auto& kv) { return kv.first == r; });
    if (!found) w.child(r).fail("missing required key");
  }
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in || path_is_dir(path))
    throw core::InputError(path, "file", std::string("cannot be read (") + (path_is_dir(path) ? "a directory" : std::strerror(errno)) + ")");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

YAML::Node load_file(const std::string& path) { return parse_text(read_text(path), path); }

YAML::Node parse_text(const std::string& text, const std::string& path) {
  try {
    return YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw core::InputError(path, fmt::format("line {}, column {}", e.mark.line + 1, e.mark.column + 1),
                     "YAML syntax error: " + e.msg);
  }
}

std::string dir_of(const std::string& path) { return fs::path(path).parent_path().string(); }
std::string stem_of(const std::string& path) { return fs::path(path).stem().string(); }

std::vector<std::string> preset_names(const std::string& preset_dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(repo_dir()) / preset_dir, ec))
    if (e.is_regular_file() && e.path().extension() == ".yaml") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string resolve(const std::string& name_or_path, const std::string& preset_dir, const std::string& kind,
                    const Where& w) {
  const fs::path p(name_or_path);
  const bool path_like = name_or_path.find('/') != std::string::npos || p.extension() == ".yaml" ||
                         p.extension() == ".yml";
  if (name_or_path.empty()) w.fail(fmt::format("must name a {} preset or a .yaml file (got nothing)", kind));
  if (path_like) {
    if (p.is_relative() && !w.dir.empty() && path_is_file(fs::path(w.dir) / p))
      return (fs::path(w.dir) / p).string();
    if (path_is_file(p)) return p.string();
    w.fail(fmt::format("{} file not found: {}{}", kind, name_or_path,
                       p.is_relative() && !w.dir.empty() ? " (looked in " + w.dir + " and the current directory)" : ""));
  }
  const fs::path preset = fs::path(repo_dir()) / preset_dir / (name_or_path + ".yaml");
  if (path_is_file(preset)) return preset.string();
  const auto names = preset_names(preset_dir);
  const std::string near = closest(name_or_path, names);
  w.fail(fmt::format("unknown {} preset '{}'{} (available: {})", kind, name_or_path,
                     near.empty() ? "" : ", did you mean '" + near + "'?", names.empty() ? "none in " + (fs::path(repo_dir()) / preset_dir).string() : join(names)));
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else out += c;
  }
  return out + "\"";
}

std::string number(double v) { return fmt::format("{}", v); }

std::string scaled(double v, double scale) {
  for (int digits = 1; digits <= 17; ++digits) {
    const std::string t = fmt::format("{:.{}g}", v / scale, digits);
    if (std::strtod(t.c_str(), nullptr) * scale == v) return t;
  }
  // No short decimal maps onto v: look for a neighbour of v / scale that does (exact round trip).
  double up = v / scale, down = v / scale;
  for (int i = 0; i < 8; ++i) {
    if (up * scale == v) return fmt::format("{}", up);
    if (down * scale == v) return fmt::format("{}", down);
    up = std::nextafter(up, HUGE_VAL);
    down = std::nextafter(down, -HUGE_VAL);
  }
  return fmt::format("{}", v / scale);
}

core::bytes_t gib_to_bytes(double gib) { return static_cast<core::bytes_t>(std::llround(gib * core::kGiB)); }
double bytes_to_gib(core::bytes_t b) { return static_cast<double>(b) / core::kGiB; }

std::string gib_text(core::bytes_t b) {
  for (int digits = 1; digits <= 17; ++digits) {
    const std::string t = fmt::format("{:.{}g}", bytes_to_gib(b), digits);
    if (gib_to_bytes(std::strtod(t.c_str(), nullptr)) == b) return t;
  }
  return fmt::format("{}", bytes_to_gib(b));
}

}  // namespace ulysses
