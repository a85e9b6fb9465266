// core/attn_impls.hpp: the table of attention implementations (name -> kernel -> calibrated key).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/attn_impls.hpp"
#include "sim/config.hpp"

using namespace ulysses;
using core::AttnKernel;

TEST_CASE("core: attention implementation lookups", "[core][attn_impls]") {
  struct Row {
    const char* name;
    AttnKernel kernel;
    bool fallback;
  };
  for (const Row& r : {Row{"flash_attention_2", AttnKernel::flash, true}, Row{"flash_attention_3", AttnKernel::flash, true},
                       Row{"sdpa", AttnKernel::flash, true}, Row{"flex_attention", AttnKernel::flash, true},
                       Row{"fa2", AttnKernel::flash, true}, Row{"", AttnKernel::flash, true},
                       Row{"ulysses_flash", AttnKernel::flash, false}, Row{"flash", AttnKernel::flash, false},
                       Row{"ulysses_reference", AttnKernel::reference, false}, Row{"reference", AttnKernel::reference, false},
                       Row{"eager", AttnKernel::reference, false}}) {
    INFO(r.name);
    const core::AttnImpl* a = core::find_attn_impl(r.name);
    REQUIRE(a != nullptr);
    CHECK(a->kernel == r.kernel);
    CHECK(a->fallback == r.fallback);
  }
  CHECK(core::find_attn_impl("flash_attention") == nullptr);
  CHECK(core::find_attn_impl("Sdpa") == nullptr);
  CHECK(core::calibrated_key(AttnKernel::flash) == "ulysses_flash");
  CHECK(core::calibrated_key(AttnKernel::reference) == "ulysses_reference");
  CHECK(core::calibrated_key(core::find_attn_impl("sdpa")->kernel) == "ulysses_flash");
}

TEST_CASE("core: the plan's attention implementations, in their order", "[core][attn_impls]") {
  const std::vector<std::string> names = {"flash_attention_2", "flash_attention_3", "sdpa", "eager",
                                          "flex_attention", "ulysses_flash", "ulysses_reference"};
  CHECK(attn_implementations() == names);
  for (const char* alias : {"", "fa2", "flash", "reference"}) CHECK_FALSE(core::find_attn_impl(alias)->plan_name);
}
