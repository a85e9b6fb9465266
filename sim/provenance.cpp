// set_provenance: find the "[kind] " clause (at the start or after "; "), replace it up to the next tagged clause.
#include "sim/provenance.hpp"

#include <cctype>
#include <stdexcept>

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

}  // namespace

void set_provenance(std::string& provenance, std::string_view kind, std::string_view text) {
  const std::string tag = "[" + std::string(kind) + "] ";
  if (tag_at(tag, 0) != tag.size()) throw std::invalid_argument("set_provenance: kind must be [a-z0-9_]+");
  const std::string clause = tag + std::string(text);
  std::size_t at = std::string::npos;
  for (std::size_t i = provenance.find(tag); i != std::string::npos; i = provenance.find(tag, i + 1))
    if (clause_start(provenance, i)) {
      at = i;
      break;
    }
  if (at == std::string::npos) {
    provenance += (provenance.empty() ? "" : std::string(kJoin)) + clause;
    return;
  }
  std::size_t end = provenance.size();  // the next tagged clause's join, or the end
  for (std::size_t i = provenance.find(kJoin, at + tag.size()); i != std::string::npos; i = provenance.find(kJoin, i + 1))
    if (clause_start(provenance, i + kJoin.size())) {
      end = i;
      break;
    }
  provenance.replace(at, end - at, clause);
}

}  // namespace ulysses
