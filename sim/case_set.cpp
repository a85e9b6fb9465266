// The case-set loader (sim/case_set.hpp): validation and capacity sets as key lists.
#include <unordered_set>

#include <fmt/format.h>

#include "sim/case_set.hpp"
#include "sim/config_internal.hpp"

namespace ulysses {
namespace {

KeyValues keys_of(const YAML::Node& n, const Where& w, std::string* name) {
  KeyValues out;
  for (const auto& [k, v] : map_items(n, w)) {
    const Where wk = w.child(k);
    const std::string text = scalar_of(v, wk, "a scalar value").text;
    if (k == "name" && name) *name = text;
    else out.emplace_back(k, text);
  }
  return out;
}

}  // namespace

CaseSet load_case_set(const std::string& path) {
  const YAML::Node root = load_file(path);
  const Where w{path, "", dir_of(path)};
  const auto items = map_items(root, w);
  reject_unknown(items, {"name", "model", "profile", "defaults", "cases"}, w);
  require_keys(items, {"model", "profile", "cases"}, w);
  CaseSet s;
  s.path = path;
  s.name = stem_of(path);
  for (const auto& [k, v] : items) {
    const Where wk = w.child(k);
    if (k == "name") s.name = parse_string(scalar_of(v, wk, "a text"), wk);
    else if (k == "model") s.model = parse_string(scalar_of(v, wk, "a model preset name"), wk);
    else if (k == "profile") s.profile = parse_string(scalar_of(v, wk, "a profile name"), wk);
    else if (k == "defaults") s.defaults = keys_of(v, wk, nullptr);
    else if (k == "cases") {
      if (!v.IsSequence() || v.size() == 0) wk.fail("must be a non-empty list of cases (maps of scenario keys)");
      std::unordered_set<std::string> names;  // linear in the cases (issue 17)
      for (std::size_t i = 0; i < v.size(); ++i) {
        const Where wi{path, fmt::format("cases[{}]", i), w.dir};
        SetCase c;
        c.name = fmt::format("case{}", i);
        c.keys = keys_of(v[i], wi, &c.name);
        if (!names.insert(c.name).second) wi.child("name").fail(fmt::format("'{}' is used by another case", c.name));
        s.cases.push_back(std::move(c));
      }
    }
  }
  return s;
}

}  // namespace ulysses
