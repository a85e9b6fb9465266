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

// Appends x with 7 significant digits, like printf("%.7g") (fixed for 1e-4 <= |x| < 1e7,
// scientific otherwise, trailing zeros dropped), several times faster than to_chars with a
// precision: the sweep writes ~40 numbers per row. Values agree with %.7g to within one unit
// in the 7th digit.
void append_g7(std::string& out, double x);

}  // namespace ulysses::reports
