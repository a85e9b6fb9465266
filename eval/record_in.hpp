#pragma once
// Stored records (`ulysses validate --out`, `ulysses capacity --out`, block and whole-step formats)
// read and checked once: every field the re-predictions read, so that a wrong one is one line naming
// the file and the key, before any case is rebuilt.
#include <cstddef>
#include <exception>
#include <string>

#include "eval/validation_set.hpp"
#include "reports/json_out.hpp"
#include "core/errors.hpp"

namespace ulysses::eval {

// Reads a stored record: JSON with a non-empty `cases` array whose fields have the types the readers
// expect. InputError naming the file otherwise; `producer` names the command that writes it.
reports::Json load_record(const std::string& path, const std::string& producer);

// The profile a stored record is re-predicted with when no --profile is given: the one its run predicted with
// (`profile_used`, e.g. `validate --set S --profile h100-sxm-80gb`: a preset name, an inline map or a file, which
// then loads or fails as --profile would), else the set's (`profile`). A `profile_used` file that is not here
// (a path on the measuring machine) falls back to `profile`, and `note` says so in one line for stderr;
// InputError when the record names no set profile then.
struct StoredProfile {
  std::string name;
  std::string note;  // empty unless the fallback was taken
};
StoredProfile stored_profile(const reports::Json& rec, const std::string& path);

// The [[key, value], ...] of a stored case.
Keys stored_keys(const reports::Json& c);

// f(case) for every stored case of a record (load_record), in order: an InputError passes through, any
// other exception becomes one InputError naming path, cases[i] and "is not a <what> (why)".
template <class F>
void for_each_stored_case(const reports::Json& rec, const std::string& path, const std::string& what, F&& f) {
  for (std::size_t i = 0; i < rec["cases"].size(); ++i) {
    try {
      f(rec["cases"][i]);
    } catch (const core::InputError&) {
      throw;
    } catch (const std::exception& e) {
      throw core::InputError(path, "cases[" + std::to_string(i) + "]", "is not a " + what + " (" + e.what() + ")");
    }
  }
}

}  // namespace ulysses::eval
