#include "reports/csv.hpp"

namespace ulysses::reports {

std::string csv_escape(std::string_view field) {
  if (field.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(field);
  std::string out = "\"";
  for (char ch : field) {
    if (ch == '"') out += '"';
    out += ch;
  }
  return out + "\"";
}

void append_csv_field(std::string& line, std::string_view field, bool first) {
  if (!first) line += ',';
  line += csv_escape(field);
}

void append_csv_row(std::string& out, const std::vector<std::string>& cells) {
  for (std::size_t i = 0; i < cells.size(); ++i) append_csv_field(out, cells[i], i == 0);
  out += '\n';
}

std::string csv_row(const std::vector<std::string>& cells) {
  std::string out;
  append_csv_row(out, cells);
  return out;
}

}  // namespace ulysses::reports
