#pragma once
// Token counts as people write them (docs/INPUTS.md "Token counts"): "131072", "64K", "1M", "1.5M",
// "128Ki". K/M/G are decimal (1M = 1,000,000, as papers write), Ki/Mi/Gi binary (1Mi = 2^20); a
// lower-case k is accepted as K. The only parser of token counts: plan.seq_len, --seq-len,
// --granularity, a sweep's granularity. Printing: reports::human_tokens.
#include <cstdint>
#include <string>

namespace ulysses {

// The exact token count of `text`, in 1..kMaxSeqLen. InputError(file, key, rule) on an
// empty text, a sign, a fraction of a token ("1.0005K"), an unknown suffix, or a count past the limit.
std::int64_t parse_tokens(const std::string& text, const std::string& file, const std::string& key);

}  // namespace ulysses
