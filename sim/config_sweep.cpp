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
std::vector<std::string> geometric_values(const YAML::Node& n, const cfg::Where& w, bool tokens) {
  const auto outer = cfg::map_items(n, w);
  cfg::reject_unknown(outer, {"geometric"}, w);
  cfg::require_keys(outer, {"geometric"}, w);
  const cfg::Where wg = w.child("geometric");
  const auto items = cfg::map_items(outer.front().second, wg);
  cfg::reject_unknown(items, kGeometricKeys, wg);
  cfg::require_keys(items, kGeometricKeys, wg);
  std::int64_t start = 0, stop = 0, factor = 0;
  for (const auto& [k, v] : items) {
    const cfg::Where wk = wg.child(k);
    const cfg::Scalar s = cfg::scalar_of(v, wk, "an integer");
    auto count = [&] { return tokens && !s.quoted ? parse_tokens(s.text, wk.file, wk.key) : cfg::positive_int(s, wk); };
    if (k == "start") start = count();
    if (k == "stop") stop = count();
    if (k == "factor") factor = cfg::parse_int(s, wk, 2, 1 << 20, "an integer >= 2");
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
  const YAML::Node root = cfg::load_file(path);
  const cfg::Where w{path, "", cfg::dir_of(path)};
  const auto items = cfg::map_items(root, w);
  cfg::reject_unknown(items, kSweepKeys, w);
  cfg::require_keys(items, {"base", "axes"}, w);

  SweepSpec spec;
  spec.path = path;
  spec.name = cfg::stem_of(path);
  for (const auto& [k, v] : items) {
    const cfg::Where wk = w.child(k);
    if (k == "name") {
      spec.name = cfg::parse_string(cfg::scalar_of(v, wk, "a text"), wk);
    } else if (k == "mode") {
      spec.mode = cfg::parse_choice(cfg::scalar_of(v, wk, "predict or plan"), wk, {"predict", "plan"});
    } else if (k == "granularity") {
      const cfg::Scalar g = cfg::scalar_of(v, wk, "a token count");
      spec.granularity = g.quoted ? cfg::positive_int(g, wk) : parse_tokens(g.text, wk.file, wk.key);
    } else if (k == "base") {
      if (v.IsMap()) {
        spec.base = cfg::parse_scenario(v, wk, spec.name);
        try {
          validate(spec.base, path);
        } catch (const core::InputError& e) {
          throw core::InputError(path, "base." + e.key(), e.rule());
        }
      } else {
        const std::string ref = cfg::scalar_of(v, wk, "a scenario file or an inline scenario map").text;
        const cfg::Where wf{path, "base", w.dir};
        if (ref.empty()) wf.fail("must name a scenario file");
        spec.base = load_scenario(cfg::resolve(ref, "scenarios", "scenario", wf));  // a path, or a name in scenarios/
      }
    }
  }
  // Axes after the base, so that every value can be tried on it.
  for (const auto& [k, v] : items) {
    if (k != "axes") continue;
    const cfg::Where wa = w.child("axes");
    const auto axes = cfg::map_items(v, wa);
    if (axes.empty()) wa.fail("must name at least one axis");
    for (const auto& [key, values] : axes) {
      const cfg::Where wk = wa.child(key);
      if (std::find(settable_keys().begin(), settable_keys().end(), key) == settable_keys().end()) {
        const std::string near = cfg::closest(key, settable_keys());
        wk.fail(near.empty() ? "unknown scenario key (docs/INPUTS.md lists the keys)"
                             : fmt::format("unknown scenario key (did you mean '{}'?)", near));
      }
      SweepAxis axis{key, {}};
      std::vector<cfg::Scalar> scalars;  // as written: a quoted "8" is not an integer
      if (values.IsSequence()) {
        if (values.size() == 0) wk.fail("must list at least one value");
        for (std::size_t i = 0; i < values.size(); ++i)
          scalars.push_back(cfg::scalar_of(values[i], cfg::Where{path, fmt::format("{}[{}]", wk.key, i), w.dir}, "a scalar value"));
      } else if (values.IsMap()) {
        for (const auto& text : geometric_values(values, wk, key == "plan.seq_len")) scalars.push_back(cfg::Scalar{text, false});
      } else {
        wk.fail("must be a list of values or {geometric: {start, stop, factor}}");
      }
      // Every value must be acceptable to set_key (type, range, preset exists).
      for (std::size_t i = 0; i < scalars.size(); ++i) {
        Scenario probe = spec.base;
        cfg::set_scalar(probe, key, scalars[i], cfg::Where{path, fmt::format("{}[{}]", wk.key, i), w.dir});
        axis.values.push_back(scalars[i].text);
      }
      spec.axes.push_back(std::move(axis));
    }
  }
  return spec;
}

}  // namespace ulysses
