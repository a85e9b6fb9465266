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
  int e2 = 0;
  std::frexp(ax, &e2);  // ax in [2^(e2-1), 2^e2)
  int e = static_cast<int>(std::floor((e2 - 1) * 0.30102999566398120));  // log10(2): e = floor(log10(ax)) or one less
  if (e - 6 < kPowMin || e + 1 > kPowMax || 6 - e > kPowMax || 6 - e < kPowMin) {  // outside the table: slow path
    char buf[32];
    auto r = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::general, 7);
    out.append(buf, r.ptr);
    return;
  }
  if (ax >= kPow10(e + 1)) ++e;
  // m: the 7 significant digits as an integer, m in [1e6, 1e7)
  auto m = static_cast<std::uint64_t>(ax * kPow10(6 - e) + 0.5);
  if (m >= 10000000) m = (m + 5) / 10, ++e;
  if (m < 1000000) m *= 10, --e;
  int digits = 7;
  while (digits > 1 && m % 10 == 0) m /= 10, --digits;  // drop trailing zeros
  char d[8];
  for (int i = digits - 1; i >= 0; --i) d[i] = static_cast<char>('0' + m % 10), m /= 10;

  char buf[32];
  char* p = buf;
  if (x < 0) *p++ = '-';
  if (e >= -4 && e < 7) {  // fixed, as %g: exponent in [-4, precision)
    if (e < 0) {
      *p++ = '0', *p++ = '.';
      for (int i = 0; i < -e - 1; ++i) *p++ = '0';
      for (int i = 0; i < digits; ++i) *p++ = d[i];
    } else if (digits <= e + 1) {
      for (int i = 0; i < digits; ++i) *p++ = d[i];
      for (int i = digits; i < e + 1; ++i) *p++ = '0';
    } else {
      for (int i = 0; i <= e; ++i) *p++ = d[i];
      *p++ = '.';
      for (int i = e + 1; i < digits; ++i) *p++ = d[i];
    }
  } else {
    *p++ = d[0];
    if (digits > 1) {
      *p++ = '.';
      for (int i = 1; i < digits; ++i) *p++ = d[i];
    }
    *p++ = 'e', *p++ = e < 0 ? '-' : '+';
    const int ae = e < 0 ? -e : e;
    if (ae >= 100) *p++ = static_cast<char>('0' + ae / 100);
    *p++ = static_cast<char>('0' + ae / 10 % 10), *p++ = static_cast<char>('0' + ae % 10);
  }
  out.append(buf, static_cast<std::size_t>(p - buf));
}

}  // namespace ulysses::reports
