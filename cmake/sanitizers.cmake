# Hardening builds (issue 17, docs/INPUTS.md "Fuzzing and sanitizers"). Both options are off by default.
#   ULYSSES_SANITIZE=ON  everything built with AddressSanitizer + UndefinedBehaviorSanitizer
#                        (-fno-sanitize-recover=undefined: the first UB report fails the test)
#   ULYSSES_FUZZ=ON      the libFuzzer targets of tests/fuzz/ (clang only); every library gets the
#                        fuzzer's coverage instrumentation (-fsanitize=fuzzer-no-link)
# One build directory with both (CC=clang CXX=clang++) serves `make test`'s hardening step.
option(ULYSSES_SANITIZE "build with ASan + UBSan" OFF)
option(ULYSSES_FUZZ "build the libFuzzer targets of tests/fuzz (needs clang)" OFF)

if(ULYSSES_SANITIZE)
  set(_ulysses_san -fsanitize=address,undefined -fno-sanitize-recover=undefined)
  foreach(_flag IN LISTS _ulysses_san ITEMS -fno-omit-frame-pointer -gline-tables-only)
    add_compile_options($<$<COMPILE_LANGUAGE:CXX>:${_flag}>)
  endforeach()
  add_link_options(${_ulysses_san})
  message(STATUS "ulysses: sanitizers: ASan + UBSan")
endif()

if(ULYSSES_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "ULYSSES_FUZZ needs clang (libFuzzer): configure with CC=clang CXX=clang++")
  endif()
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link>)
  message(STATUS "ulysses: fuzz targets: tests/fuzz (libFuzzer)")
endif()
