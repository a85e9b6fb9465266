#pragma once
// CSV (RFC 4180): one header row, then rows; a field with ',', '"', CR or LF is quoted and its
// quotes doubled. Lines end with '\n'.
#include <string>
#include <string_view>
#include <vector>

namespace ulysses::reports {

std::string csv_escape(std::string_view field);
void append_csv_field(std::string& line, std::string_view field, bool first);
void append_csv_row(std::string& out, const std::vector<std::string>& cells);
std::string csv_row(const std::vector<std::string>& cells);

}  // namespace ulysses::reports
