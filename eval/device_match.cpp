// gpu_family / device_profile_note: the model token of each name compared, nothing else (memory sizes and
// form factors of one family are the profile's business); device_with_kernels: the device line of a set.
#include "eval/device_match.hpp"

#include <cctype>
#include <sstream>
#include <utility>

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

std::string device_with_kernels(const std::string& device, const std::map<std::string, int>& cases_per_kernel) {
  if (cases_per_kernel.size() < 2) return device;
  std::string mix = "attention kernels ";
  const char* sep = "";
  for (const auto& [k, n] : cases_per_kernel) mix += fmt::format("{}{} ({} case{})", std::exchange(sep, ", "), k, n, n == 1 ? "" : "s");
  const std::string one = "attention kernel ";
  const std::size_t at = device.find(one);
  if (at == std::string::npos) return device.empty() ? mix : device + "; " + mix;
  const std::size_t end = device.find(", ", at);  // the kernel's name ends at the next item
  return device.substr(0, at) + mix + (end == std::string::npos ? "" : device.substr(end));
}

}  // namespace ulysses::eval
