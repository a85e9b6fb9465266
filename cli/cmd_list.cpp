// ulysses list models|profiles: the presets found (sim/preset_list.hpp), as a table or JSON.
#include <cstdio>
#include <iostream>
#include <string>

#include <fmt/format.h>

#include "cli/options.hpp"
#include "core/errors.hpp"
#include "sim/preset_list.hpp"

namespace ulysses::cli {
namespace {

int run_list(int argc, char** argv) {
  po::options_description d("list options", kHelpColumns, kHelpDescColumn);
  d.add_options()("help,h", "this help")("what", po::value<std::string>(), "models | profiles (positional)")
      ("format", po::value<std::string>()->default_value("table"), "output: table | json");
  po::positional_options_description pos;
  pos.add("what", 1);
  const auto vm = parse_args(argc, argv, d, &pos);
  if (vm.count("help")) {
    print_help(argv[0], "models|profiles [--format table|json]",
               "Lists the model presets (--model NAME) or hardware profiles (--profile NAME) found in the\n"
               "data folder (docs/INPUTS.md \"Where presets are found\"), one line each.",
               d);
    return core::kExitOk;
  }
  if (!vm.count("what")) throw core::InputError("", "models|profiles", "say what to list: ulysses list models (or profiles)");
  const std::string what = vm["what"].as<std::string>();
  if (what != "models" && what != "profiles")
    throw core::InputError("", "models|profiles", "'" + what + "' is not one of models, profiles");
  const Format format = format_of(vm);
  if (format == Format::csv) throw core::InputError("", "--format", "'csv' is not one of table, json (for list)");

  reports::Json j = reports::Json::array();
  if (what == "models") {
    const auto models = list_models();
    for (const auto& m : models)
      j.push_back({{"name", m.name}, {"layers", m.layers}, {"hidden", m.hidden}, {"heads", m.heads},
                   {"kv_heads", m.kv_heads}, {"params", m.params}, {"path", m.path}});
    if (format == Format::table) {
      std::cout << fmt::format("# model presets in {}/scenarios/models\n", preset_root());
      std::cout << fmt::format("{:<24} {:>6} {:>7} {:>6} {:>8} {:>9}\n", "name", "layers", "hidden", "heads", "kv_heads", "params");
      for (const auto& m : models)
        std::cout << fmt::format("{:<24} {:>6} {:>7} {:>6} {:>8} {:>8.2f}B\n", m.name, m.layers, m.hidden, m.heads,
                                 m.kv_heads, static_cast<double>(m.params) / 1e9);
    }
  } else {
    const auto profiles = list_profiles();
    for (const auto& p : profiles)
      j.push_back({{"name", p.name}, {"gpu", p.gpu}, {"hbm_GiB", p.hbm_GiB}, {"gpus_per_node", p.gpus_per_node},
                   {"calibrated", p.calibrated}, {"path", p.path}});
    if (format == Format::table) {
      std::cout << fmt::format("# hardware profiles in {}/profiles\n", preset_root());
      std::cout << fmt::format("{:<20} {:>8} {:>9} {:>10}  {}\n", "name", "HBM GiB", "GPUs/node", "calibrated", "gpu");
      for (const auto& p : profiles)
        std::cout << fmt::format("{:<20} {:>8.1f} {:>9} {:>10}  {}\n", p.name, p.hbm_GiB, p.gpus_per_node,
                                 p.calibrated ? "yes" : "no", p.gpu);
    }
  }
  if (format == Format::json) std::cout << j.dump(2) << "\n";
  return core::kExitOk;
}

const RegisterCommand reg{"list", "the model presets or hardware profiles found", &run_list};

}  // namespace
}  // namespace ulysses::cli
