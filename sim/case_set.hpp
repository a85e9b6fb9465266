#pragma once
// Case sets (validation and capacity sets, scenarios/validation/*.yaml): a base model and profile,
// defaults, and named cases, each a list of dotted keys with their text values (set_key's, and the
// deepspeed backend's run.* worker options). Only the file's shape is checked here (maps of scalars,
// known top-level keys, unique case names); building each case's scenario is the caller's
// (eval/validation_set.hpp). Errors: InputError naming file and key.
#include <string>
#include <utility>
#include <vector>

namespace ulysses {

using KeyValues = std::vector<std::pair<std::string, std::string>>;
struct SetCase {
  std::string name;  // "case<i>" unless given
  KeyValues keys;    // applied after the set's defaults
};
struct CaseSet {
  std::string path, name, model, profile;
  KeyValues defaults;
  std::vector<SetCase> cases;
};
CaseSet load_case_set(const std::string& path);

}  // namespace ulysses
