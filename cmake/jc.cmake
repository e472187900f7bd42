# Helpers shared by every target: warnings, a library and a Catch2 test in one line.

set(JC_WARNINGS -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  # GCC 12 reports false positives inside std::variant moves.
  list(APPEND JC_WARNINGS -Wno-maybe-uninitialized)
endif()

# jc_library(name SRCS ... DEPS ...)
function(jc_library name)
  cmake_parse_arguments(ARG "" "" "SRCS;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SRCS})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_compile_options(${name} PRIVATE ${JC_WARNINGS})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
endfunction()

# jc_test(name SRCS ... DEPS ... [PREFIX "text: "] [LOCK resource]): a Catch2 v2 binary
# registered with CTest, one CTest test per test case; PREFIX tells apart binaries that share
# test cases (the adapter conformance kit); LOCK names a resource its test cases hold alone
# (ctest -j runs them one at a time: the test Slurm cluster's one node, which tests fill);
# PROPS: more CTest properties for its test cases (a later TIMEOUT overrides 120 s).
# Every test binary shares one precompiled main (jc_catch_main).
function(jc_test name)
  cmake_parse_arguments(ARG "" "PREFIX;LOCK" "SRCS;DEPS;PROPS" ${ARGN})
  set(lock)
  if(ARG_LOCK)
    set(lock RESOURCE_LOCK ${ARG_LOCK})
  endif()
  add_executable(${name} ${ARG_SRCS})
  target_compile_options(${name} PRIVATE ${JC_WARNINGS})
  target_link_libraries(${name} PRIVATE jc_catch_main ${ARG_DEPS})
  # -w NoTests: a test name that matches nothing fails instead of passing vacuously.
  catch_discover_tests(${name} EXTRA_ARGS -w NoTests TEST_PREFIX "${ARG_PREFIX}" PROPERTIES TIMEOUT 120 ${lock} ${ARG_PROPS})
endfunction()
