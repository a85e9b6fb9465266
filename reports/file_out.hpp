#pragma once
// Writing an output file so that a failed or interrupted write leaves nothing that looks whole:
// the text goes to a temporary file next to `path` (same folder: the rename stays on one file
// system), is flushed and fsync'ed, and only then renamed over `path`.
#include <string>

namespace ulysses::reports {

// Throws std::runtime_error "cannot write '<path>': <reason>" (the temporary file removed).
void write_file_atomic(const std::string& path, const std::string& text);

}  // namespace ulysses::reports
