#pragma once
// The presets found under repo_dir() (`ulysses list`): each model and hardware profile loaded and summarised.
#include <cstdint>
#include <string>
#include <vector>

namespace ulysses {

struct ModelSummary {
  std::string name;  // the preset name (file stem): what --model takes
  std::int64_t layers = 0, hidden = 0, heads = 0, kv_heads = 0;
  std::int64_t params = 0;  // total_params (sim/model.hpp)
  std::string path;
};
struct ProfileSummary {
  std::string name;  // what --profile takes
  std::string gpu;
  double hbm_GiB = 0;
  std::int64_t gpus_per_node = 0;
  bool calibrated = false;
  std::string path;
};

// Sorted by name. A preset that does not load throws its InputError (a broken file is not skipped).
std::vector<ModelSummary> list_models();
std::vector<ProfileSummary> list_profiles();
std::string preset_root();  // repo_dir(), for the listing's header (throws like it)

}  // namespace ulysses
