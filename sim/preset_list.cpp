// `ulysses list`: the model and profile presets under repo_dir(), loaded through the strict loaders.
#include "sim/preset_list.hpp"

#include "sim/config.hpp"
#include "sim/config_internal.hpp"
#include "sim/model.hpp"

namespace ulysses {

std::string preset_root() { return repo_dir(); }

std::vector<ModelSummary> list_models() {
  std::vector<ModelSummary> out;
  for (const auto& name : preset_names("scenarios/models")) {
    const ModelSpec m = load_model(name);
    out.push_back({name, m.layers, m.hidden, m.heads, m.kv_heads, total_params(m), repo_dir() + "/scenarios/models/" + name + ".yaml"});
  }
  return out;
}

std::vector<ProfileSummary> list_profiles() {
  std::vector<ProfileSummary> out;
  for (const auto& name : preset_names("profiles")) {
    const HardwareProfile p = load_profile(name);
    out.push_back({name, p.gpu, bytes_to_gib(p.hbm_bytes), p.gpus_per_node, p.has_calibration,
                   repo_dir() + "/profiles/" + name + ".yaml"});
  }
  return out;
}

}  // namespace ulysses
