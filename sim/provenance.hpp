#pragma once
// A calibrated section's provenance text, one clause per kind of measurement: "[kind] what, when, how",
// the clauses joined by "; ". A later measurement of a kind replaces that kind's clause, so the text says once
// where each calibrated value came from (re-running `calibrate --only ...` used to append a second copy).
#include <string>
#include <string_view>

namespace ulysses {

// Replaces the clause "[kind] ..." of `provenance` with "[kind] text", or appends it. Text before the first
// tagged clause (profiles written before the tags) is kept as it is. kind: [a-z0-9_]+ (else invalid_argument);
// a "; [" inside text is written ", [" (it would read as a clause boundary).
void set_provenance(std::string& provenance, std::string_view kind, std::string_view text);
// Removes the clause "[kind] ..." (and its join) when present: a value another clause now accounts for.
void drop_provenance(std::string& provenance, std::string_view kind);

}  // namespace ulysses
