// Every test case's name is one the console reporter can print. Catch2 v2 (ConsoleReporter::printHeaderString)
// indents a failing test's wrapped name to just after its first ": "; where that lies beyond the console width
// (79 columns) the wrap never ends and the reporter loops, ignoring SIGTERM, instead of reporting the failure (seen
// 2026-12-06 with a ": " at column 86). A CI run would then stall until its time limit.
#include <catch2/catch.hpp>

#include <string>

TEST_CASE("test names: the first ': ' of every name lies where the reporter can wrap after it", "[names][gpu]") {
  // the reporter wraps at CATCH_CONFIG_CONSOLE_WIDTH - 1 = 79 columns: leave some of them after the indent
  constexpr std::size_t kMaxColon = 70;
  for (const Catch::TestCase& t : Catch::getRegistryHub().getTestCaseRegistry().getAllTests()) {
    const std::size_t i = t.name.find(": ");
    INFO(t.name);
    CHECK((i == std::string::npos || i + 2 <= kMaxColon));
  }
}
