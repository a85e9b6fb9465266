#include "reports/csv.hpp"

#include <charconv>
#include <cmath>

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

namespace {

constexpr int kPowMin = -40, kPowMax = 40;
struct Pow10 {
  double v[kPowMax - kPowMin + 1];
  constexpr Pow10() : v() {
    v[-kPowMin] = 1;
    for (int i = 1; i <= kPowMax; ++i) v[-kPowMin + i] = v[-kPowMin + i - 1] * 10;
    for (int i = 1; i <= -kPowMin; ++i) v[-kPowMin - i] = v[-kPowMin - i + 1] / 10;
  }
  double operator()(int e) const { return v[e - kPowMin]; }
};
constexpr Pow10 kPow10;

void append_digits(std::string& out, std::uint64_t n) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, n);
  out.append(buf, r.ptr);
}

}  // namespace

void append_g7(std::string& out, double x) {
  if (x == 0) {
    out += '0';
    return;
  }
  if (!std::isfinite(x)) {
    out += std::isnan(x) ? "nan" : (x > 0 ? "inf" : "-inf");
    return;
  }
  const double ax = std::fabs(x);
  int e = static_cast<int>(std::floor(std::log10(ax)));
  if (e - 6 < kPowMin || 6 - e > kPowMax || 6 - e < kPowMin) {  // far outside the table: the slow path
    char buf[32];
    auto r = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::general, 7);
    out.append(buf, r.ptr);
    return;
  }
  // m: the 7 significant digits as an integer, m in [1e6, 1e7)
  std::uint64_t m = static_cast<std::uint64_t>(std::llround(ax * kPow10(6 - e)));
  if (m >= 10000000) m /= 10, ++e;
  if (m < 1000000) m *= 10, --e;
  if (x < 0) out += '-';
  int digits = 7;
  while (digits > 1 && m % 10 == 0) m /= 10, --digits;  // drop trailing zeros
  char d[8];
  for (int i = digits - 1; i >= 0; --i) d[i] = static_cast<char>('0' + m % 10), m /= 10;
  if (e >= -4 && e < 7) {  // fixed, as %g: exponent in [-4, precision)
    if (e < 0) {
      out += "0.";
      out.append(static_cast<std::size_t>(-e - 1), '0');
      out.append(d, static_cast<std::size_t>(digits));
    } else if (digits <= e + 1) {
      out.append(d, static_cast<std::size_t>(digits));
      out.append(static_cast<std::size_t>(e + 1 - digits), '0');
    } else {
      out.append(d, static_cast<std::size_t>(e + 1));
      out += '.';
      out.append(d + e + 1, static_cast<std::size_t>(digits - e - 1));
    }
    return;
  }
  out += d[0];
  if (digits > 1) {
    out += '.';
    out.append(d + 1, static_cast<std::size_t>(digits - 1));
  }
  out += e < 0 ? "e-" : "e+";
  const int ae = std::abs(e);
  if (ae < 10) out += '0';
  append_digits(out, static_cast<std::uint64_t>(ae));
}

}  // namespace ulysses::reports
