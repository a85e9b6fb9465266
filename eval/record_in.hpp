#pragma once
// Stored records (`ulysses validate --out`, `ulysses capacity --out`, block and whole-step formats)
// read and checked once: every field the re-predictions read, so that a wrong one is one line naming
// the file and the key, before any case is rebuilt.
#include <string>

#include "reports/json_out.hpp"

namespace ulysses::eval {

// Reads a stored record: JSON with a non-empty `cases` array whose fields have the types the readers
// expect. InputError naming the file otherwise; `producer` names the command that writes it.
reports::Json load_record(const std::string& path, const std::string& producer);

}  // namespace ulysses::eval
