// Writers: CSV escaping, table alignment, JSON breakdowns and flattening.
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "reports/csv.hpp"
#include "reports/json_out.hpp"
#include "reports/table.hpp"

using namespace ulysses;
using namespace ulysses::reports;

TEST_CASE("csv_escape quotes only what needs quoting (RFC 4180)", "[reports]") {
  CHECK(csv_escape("plain") == "plain");
  CHECK(csv_escape("") == "");
  CHECK(csv_escape("a,b") == "\"a,b\"");
  CHECK(csv_escape("say \"hi\"") == "\"say \"\"hi\"\"\"");
  CHECK(csv_escape("two\nlines") == "\"two\nlines\"");
  CHECK(csv_escape("cr\r") == "\"cr\r\"");
  CHECK(csv_row({"a", "b,c", "d"}) == "a,\"b,c\",d\n");
  CHECK(csv_row({}) == "\n");
}

namespace {
std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}
}  // namespace

TEST_CASE("table: header and units rows, right-aligned numbers end in one column", "[reports]") {
  Table t({{"term", "", Align::left}, {"size", "GiB"}, {"time", "us"}});
  t.add_row({"weights", "1.5", "12345.6"});
  t.add_row({"a_much_longer_term_name", "123.25", "7"});
  const auto lines = lines_of(t.render());
  REQUIRE(lines.size() == 4);
  CHECK(lines[0][0] == '#');
  CHECK(lines[1][0] == '#');
  CHECK(lines[1].find("(GiB)") != std::string::npos);
  CHECK(lines[1].find("(us)") != std::string::npos);
  // the last (right-aligned) column ends at the same position on every line
  const std::size_t end = lines[0].size();
  for (const auto& l : lines) CHECK(l.size() == end);
  // the size column ends at the same position too
  const std::size_t size_end = lines[2].find("1.5") + 3;
  CHECK(lines[3].find("123.25") + 6 == size_end);
  CHECK(lines[1].find("(GiB)") + 5 == size_end);
  // left-aligned first column starts right after the lead char and two spaces
  CHECK(lines[2].substr(0, 10) == "   weights");
  CHECK_THROWS_AS(t.add_row({"only one"}), std::invalid_argument);
}

TEST_CASE("breakdown JSON lists every term and a total that is their sum", "[reports]") {
  MemoryBreakdown m;
  m.add("weights", 100);
  m.add("grads", 50);
  m.add("weights", 7);  // a repeated name is summed, so the map still sums to the total
  const auto j = breakdown_json(m);
  CHECK(j["weights"] == 107);
  CHECK(j["grads"] == 50);
  CHECK(j["total"] == 157);
  CHECK(j.size() == 3);
}

TEST_CASE("flatten gives dotted keys in document order", "[reports]") {
  Json j = {{"a", 1}, {"b", {{"c", "x,y"}, {"d", 0.5}}}, {"e", true}};
  const auto flat = flatten(j);
  REQUIRE(flat.size() == 4);
  CHECK(flat[0] == std::make_pair(std::string("a"), std::string("1")));
  CHECK(flat[1] == std::make_pair(std::string("b.c"), std::string("x,y")));
  CHECK(flat[2] == std::make_pair(std::string("b.d"), std::string("0.5")));
  CHECK(flat[3] == std::make_pair(std::string("e"), std::string("true")));
}

TEST_CASE("memory and phase tables carry total rows", "[reports]") {
  MemoryBreakdown m;
  m.add("weights", core::kGiBytes);
  m.add("grads", core::kGiBytes);
  const std::string mt = memory_table(m, 4 * core::kGiBytes, "GPU");
  CHECK(mt.find("total") != std::string::npos);
  CHECK(mt.find("2.000") != std::string::npos);
  CHECK(mt.find("50.0") != std::string::npos);  // each term's share and the capacity use
  PhaseTimes p;
  p.add("attn.fwd", 0.003);
  p.add("a2a.qkv.fwd", 0.001);
  const std::string pt = phase_table(p);
  CHECK(pt.find("4.00 ms") != std::string::npos);  // the step, scaled (human_time)
  CHECK(pt.find("3.00 ms") != std::string::npos);
  CHECK(pt.find("1.00 ms") != std::string::npos);
  CHECK(pt.find("75.0") != std::string::npos);
}

TEST_CASE("append_g7 prints what %.7g prints, up to the last digit", "[reports]") {
  const double values[] = {0,      1,          -1,        0.5,      123456.7,  1234567,  12345678, 1e7,
                           9999999.6, 0.0001234567, 1.5e-5, 9.99999999e-6, 3.14159265358979, -2.5e-12,
                           6.02214076e23, 1e300, 5e-310, 0.1, 100, 7.25};
  for (double x : values) {
    std::string mine;
    append_g7(mine, x);
    char ref[64];
    std::snprintf(ref, sizeof ref, "%.7g", x);
    INFO(x << " -> " << mine << " vs " << ref);
    if (x == 0) {
      CHECK(mine == "0");
      continue;
    }
    CHECK(std::strtod(mine.c_str(), nullptr) == Approx(x).epsilon(1.01e-6));
    // same notation: both fixed or both scientific
    CHECK((mine.find('e') == std::string::npos) == (std::string(ref).find('e') == std::string::npos));
  }
  std::string s;
  append_g7(s, 0.25);
  s += ',';
  append_g7(s, 1e-7);
  s += ',';
  append_g7(s, 4096);
  CHECK(s == "0.25,1e-07,4096");
}
