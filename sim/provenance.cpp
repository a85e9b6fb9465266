// set_provenance / drop_provenance: find the "[kind] " clause (at the start or after "; "), up to the next tagged clause.
#include "sim/provenance.hpp"

#include <cctype>
#include <stdexcept>
#include <utility>

namespace ulysses {
namespace {

constexpr std::string_view kJoin = "; ";

// the length of a tag "[kind] " starting at i, or 0
std::size_t tag_at(std::string_view s, std::size_t i) {
  if (i >= s.size() || s[i] != '[') return 0;
  std::size_t j = i + 1;
  while (j < s.size() && (std::islower(static_cast<unsigned char>(s[j])) || std::isdigit(static_cast<unsigned char>(s[j])) ||
                          s[j] == '_'))
    ++j;
  if (j == i + 1 || j + 1 >= s.size() || s[j] != ']' || s[j + 1] != ' ') return 0;
  return j + 2 - i;
}

bool clause_start(std::string_view s, std::size_t i) {
  return tag_at(s, i) > 0 && (i == 0 || (i >= kJoin.size() && s.substr(i - kJoin.size(), kJoin.size()) == kJoin));
}

std::string tag_of(std::string_view kind) {
  std::string tag = "[" + std::string(kind) + "] ";
  if (tag_at(tag, 0) != tag.size()) throw std::invalid_argument("provenance: kind must be [a-z0-9_]+");
  return tag;
}

// [begin, end) of the clause with this tag, end at the next tagged clause's join; begin == npos when absent
std::pair<std::size_t, std::size_t> clause(const std::string& p, const std::string& tag) {
  for (std::size_t i = p.find(tag); i != std::string::npos; i = p.find(tag, i + 1)) {
    if (!clause_start(p, i)) continue;
    for (std::size_t j = p.find(kJoin, i + tag.size()); j != std::string::npos; j = p.find(kJoin, j + 1))
      if (clause_start(p, j + kJoin.size())) return {i, j};
    return {i, p.size()};
  }
  return {std::string::npos, 0};
}

}  // namespace

void set_provenance(std::string& provenance, std::string_view kind, std::string_view text) {
  const std::string tag = tag_of(kind);
  std::string body(text);  // a "; [" inside the text would read as the next clause's start
  for (std::size_t i = body.find("; ["); i != std::string::npos; i = body.find("; [", i + 2)) body[i] = ',';
  const auto [b, e] = clause(provenance, tag);
  if (b == std::string::npos) {
    provenance += (provenance.empty() ? "" : std::string(kJoin)) + tag + body;
    return;
  }
  provenance.replace(b, e - b, tag + body);
}

void drop_provenance(std::string& provenance, std::string_view kind) {
  const auto [b, e] = clause(provenance, tag_of(kind));
  if (b == std::string::npos) return;
  // with the join before it (or, for the first clause, the one after it)
  if (b >= kJoin.size()) provenance.erase(b - kJoin.size(), e - b + kJoin.size());
  else provenance.erase(b, e < provenance.size() ? e - b + kJoin.size() : e - b);
}

}  // namespace ulysses
