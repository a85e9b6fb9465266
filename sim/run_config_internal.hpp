#pragma once
// Internals shared by sim/run_config*.cpp: a reader that sets scenario keys from one run-config
// file and echoes every key. Not a public API: include sim/run_config.hpp instead.
#include <string>

#include <yaml-cpp/yaml.h>

#include "sim/config_internal.hpp"
#include "sim/run_config.hpp"

namespace ulysses {

class Reader {
 public:
  Reader(Scenario& sc, RunConfigRead& rc, std::string file)
      : sc_(sc), rc_(rc), file_(std::move(file)), dir_(dir_of(file_)) {}
  Where at(const std::string& key) const { return Where{file_, key, dir_}; }
  const std::string& file() const { return file_; }
  const std::string& dir() const { return dir_; }
  Scenario& scenario() { return sc_; }
  RunConfigRead& read() { return rc_; }

  // `key` (written as `value`) sets scenario key `target` to `text`, through set_key's parser and
  // rules (errors name this file and key); earlier entries setting `target` are marked overridden.
  void set(const std::string& key, const std::string& value, const std::string& target, const std::string& text,
           const std::string& note = "");
  // `key` read, setting nothing (checked, auto, ...).
  void echo(const std::string& key, const std::string& value, const std::string& note);
  // Every key under n as "not used" (maps flattened a few levels deep).
  void unused(const std::string& key, const YAML::Node& n, int depth = 0);
  // The scalar at n; InputError "must be <expected> (got a map)" otherwise.
  std::string text(const YAML::Node& n, const std::string& key, const std::string& expected) const;

 private:
  Scenario& sc_;
  RunConfigRead& rc_;
  std::string file_, dir_;
};

bool is_auto(const YAML::Node& n);  // the scalar "auto" (HF convention: filled in from elsewhere)

// Each reads one file into sc and rc. read_accelerate returns the DeepSpeed JSON its
// deepspeed_config.deepspeed_config_file names (resolved against the YAML's folder), or "".
std::string read_accelerate(Scenario& sc, RunConfigRead& rc, const std::string& path);
void read_deepspeed(Scenario& sc, RunConfigRead& rc, const std::string& path);

}  // namespace ulysses
