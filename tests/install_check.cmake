# ctest install_finds_presets: `cmake --install` into a fresh prefix, then the installed binary (ULYSSES_HOME unset) lists the presets from <prefix>/share/ulysses.
file(REMOVE_RECURSE ${PREFIX})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD} --prefix ${PREFIX} RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=ULYSSES_HOME ${PREFIX}/bin/ulysses list models
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
file(REMOVE_RECURSE ${PREFIX})
if(NOT rc EQUAL 0 OR NOT out MATCHES "in ${PREFIX}/share/ulysses/scenarios/models" OR NOT out MATCHES "\nllama-3.1-8b ")
  message(FATAL_ERROR "installed ulysses did not list its presets (rc ${rc}):\n${out}${err}")
endif()
