#pragma once
// core/ (namespace ulysses::core), the ground floor: standard library only; every library may include it.
// User-input errors: one line naming the file, the key and the rule. The CLI prints
// "ulysses: error: <what()>" and exits with kExitInput. Never assert on user input.
#include <stdexcept>
#include <string>

namespace ulysses::core {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;   // a run failed (wrong results, CUDA/NCCL error, timeout)
inline constexpr int kExitInput = 2;     // bad input (file, key, rule)
inline constexpr int kExitDoesNotFit = 3;    // predict --fail-if-not-fits: the scenario does not fit
inline constexpr int kExitNotReachable = 3;  // plan --target-seq-len: no GPU count up to the limit reaches it

class InputError : public std::runtime_error {
 public:
  // file may be "" (command line: use "--flag"), key is the dotted YAML path or flag.
  InputError(const std::string& file, const std::string& key, const std::string& rule)
      : std::runtime_error((file.empty() ? std::string("command line") : file) + ": " + key + ": " + rule),
        file_(file), key_(key), rule_(rule) {}
  const std::string& file() const { return file_; }
  const std::string& key() const { return key_; }
  const std::string& rule() const { return rule_; }

 private:
  std::string file_, key_, rule_;
};

}  // namespace ulysses::core
