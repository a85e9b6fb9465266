// gpu_family / device_profile_note: the model token of each name compared, nothing else (memory sizes and
// form factors of one family are the profile's business).
#include "eval/device_match.hpp"

#include <cctype>
#include <sstream>

#include <fmt/format.h>

namespace ulysses::eval {

std::string gpu_family(const std::string& name) {
  std::istringstream in(name);
  bool nvidia = false;  // only an NVIDIA GPU's name: a CPU model ("i9-13900K") is no GPU family
  for (std::string w; in >> w;) {
    if (w == "NVIDIA") {
      nvidia = true;
      continue;
    }
    if (!nvidia) continue;
    while (!w.empty() && !std::isalnum(static_cast<unsigned char>(w.back()))) w.pop_back();
    if (w.empty() || !std::isalpha(static_cast<unsigned char>(w.front()))) continue;
    for (char c : w)
      if (std::isdigit(static_cast<unsigned char>(c))) return w;
  }
  return "";
}

std::string device_profile_note(const Scenario& sc, const std::string& device) {
  const std::string a = gpu_family(device), b = gpu_family(sc.hw.gpu);
  if (a.empty() || b.empty() || a == b) return "";
  return fmt::format("note: measured on {}, predicted for profile {} ({}): the errors include the difference "
                     "between the GPUs (give --profile of the GPU that ran)",
                     device, sc.hw.name, sc.hw.gpu);
}

}  // namespace ulysses::eval
