#pragma once
// Whether a run measured the GPU its profile describes. The model predicts the profile's GPU, so a run on
// another one (an H100 measured against h200-sxm-141gb) is said in one line on stderr by compare, validate
// and bench, rather than its errors reading as the model's.
#include <map>
#include <string>

#include "sim/scenario.hpp"

namespace ulysses::eval {

// The GPU's model token of a name: the first word after "NVIDIA" that starts with a letter and holds a digit
// ("H100" of "NVIDIA H100 80GB HBM3" and of "NVIDIA H100 SXM5 80GB", "H200" of "1x NVIDIA H200 (single process)");
// "" if none (a CPU backend's host, a run that names no device).
std::string gpu_family(const std::string& name);

// "" when the device and the profile's GPU are of one family (or either has none, e.g. the CPU backend), else
// "note: measured on <device>, predicted for profile <name> (<gpu>): ..." (one line, no newline).
std::string device_profile_note(const Scenario& sc, const std::string& device);

// A set's device line where its cases ran more than one attention kernel (a validation set with a reference
// case among flash ones): the one case's "attention kernel <k>" becomes "attention kernels <k1> (n1 cases),
// <k2> (n2 cases)", kernels as named by Measurement::attn_kernel; appended ("; attention kernels ...") where
// the line names none. One kernel or none counted: the line as it is.
std::string device_with_kernels(const std::string& device, const std::map<std::string, int>& cases_per_kernel);

}  // namespace ulysses::eval
