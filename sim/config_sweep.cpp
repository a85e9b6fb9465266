// Sweep specs: a base scenario plus named axes over any settable key (docs/INPUTS.md "Sweeps").
#include <algorithm>

#include <fmt/format.h>

#include "sim/config.hpp"
#include "sim/config_internal.hpp"
#include "sim/tokens.hpp"

namespace ulysses {

namespace {

const std::vector<std::string> kSweepKeys = {"name", "base", "axes", "mode", "granularity"};
const std::vector<std::string> kGeometricKeys = {"start", "stop", "factor"};

// {geometric: {start, stop, factor}} -> start, start*factor, ... up to and including stop.
// tokens: start and stop are token counts (the plan.seq_len axis: 64K, 1M, 128Ki).
std::vector<std::string> geometric_values(const YAML::Node& n, const Where& w, bool tokens) {
  const auto outer = map_items(n, w);
  reject_unknown(outer, {"geometric"}, w);
  require_keys(outer, {"geometric"}, w);
  const Where wg = w.child("geometric");
  const auto items = map_items(outer.front().second, wg);
  reject_unknown(items, kGeometricKeys, wg);
  require_keys(items, kGeometricKeys, wg);
  std::int64_t start = 0, stop = 0, factor = 0;
  for (const auto& [k, v] : items) {
    const Where wk = wg.child(k);
    const Scalar s = scalar_of(v, wk, "an integer");
    auto count = [&] { return tokens && !s.quoted ? parse_tokens(s.text, wk.file, wk.key) : positive_int(s, wk); };
    if (k == "start") start = count();
    if (k == "stop") stop = count();
    if (k == "factor") factor = parse_int(s, wk, 2, 1 << 20, "an integer >= 2");
  }
  if (stop < start) wg.child("stop").fail(fmt::format("must be >= start (start {}, stop {})", start, stop));
  std::vector<std::string> values;
  for (std::int64_t v = start; v <= stop; v *= factor) {
    values.push_back(std::to_string(v));
    if (v > stop / factor) break;  // the next value would pass stop (or overflow)
  }
  return values;
}

}  // namespace

SweepSpec load_sweep(const std::string& path) {
  const YAML::Node root = load_file(path);
  const Where w{path, "", dir_of(path)};
  const auto items = map_items(root, w);
  reject_unknown(items, kSweepKeys, w);
  require_keys(items, {"base", "axes"}, w);

  SweepSpec spec;
  spec.path = path;
  spec.name = stem_of(path);
  for (const auto& [k, v] : items) {
    const Where wk = w.child(k);
    if (k == "name") {
      spec.name = parse_string(scalar_of(v, wk, "a text"), wk);
    } else if (k == "mode") {
      spec.mode = parse_choice(scalar_of(v, wk, "predict or plan"), wk, {"predict", "plan"});
    } else if (k == "granularity") {
      const Scalar g = scalar_of(v, wk, "a token count");
      spec.granularity = g.quoted ? positive_int(g, wk) : parse_tokens(g.text, wk.file, wk.key);
    } else if (k == "base") {
      if (v.IsMap()) {
        spec.base = parse_scenario(v, wk, spec.name);
        try {
          validate(spec.base, path);
        } catch (const core::InputError& e) {
          throw core::InputError(path, "base." + e.key(), e.rule());
        }
      } else {
        const std::string ref = scalar_of(v, wk, "a scenario file or an inline scenario map").text;
        const Where wf{path, "base", w.dir};
        if (ref.empty()) wf.fail("must name a scenario file");
        spec.base = load_scenario(resolve(ref, "scenarios", "scenario", wf));  // a path, or a name in scenarios/
      }
    }
  }
  // Axes after the base, so that every value can be tried on it.
  for (const auto& [k, v] : items) {
    if (k != "axes") continue;
    const Where wa = w.child("axes");
    const auto axes = map_items(v, wa);
    if (axes.empty()) wa.fail("must name at least one axis");
    for (const auto& [key, values] : axes) {
      const Where wk = wa.child(key);
      if (std::find(settable_keys().begin(), settable_keys().end(), key) == settable_keys().end()) {
        const std::string near = closest(key, settable_keys());
        wk.fail(near.empty() ? "unknown scenario key (docs/INPUTS.md lists the keys)"
                             : fmt::format("unknown scenario key (did you mean '{}'?)", near));
      }
      SweepAxis axis{key, {}};
      std::vector<Scalar> scalars;  // as written: a quoted "8" is not an integer
      if (values.IsSequence()) {
        if (values.size() == 0) wk.fail("must list at least one value");
        for (std::size_t i = 0; i < values.size(); ++i)
          scalars.push_back(scalar_of(values[i], Where{path, fmt::format("{}[{}]", wk.key, i), w.dir}, "a scalar value"));
      } else if (values.IsMap()) {
        for (const auto& text : geometric_values(values, wk, key == "plan.seq_len")) scalars.push_back(Scalar{text, false});
      } else {
        wk.fail("must be a list of values or {geometric: {start, stop, factor}}");
      }
      // Every value must be acceptable to set_key (type, range, preset exists).
      for (std::size_t i = 0; i < scalars.size(); ++i) {
        Scenario probe = spec.base;
        set_scalar(probe, key, scalars[i], Where{path, fmt::format("{}[{}]", wk.key, i), w.dir});
        axis.values.push_back(scalars[i].text);
      }
      spec.axes.push_back(std::move(axis));
    }
  }
  return spec;
}

}  // namespace ulysses
