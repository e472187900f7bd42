# Helpers shared by every target: warnings, a library and a Catch2 test in one line.

set(JC_WARNINGS -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  # GCC 12 reports false positives inside std::variant moves.
  list(APPEND JC_WARNINGS -Wno-maybe-uninitialized)
endif()

# Test binaries' own files are built for compile time, not speed: what they test is in the
# libraries (built -O2 -g1 as everything else), and at -O2 with line tables a test file full
# of Catch2 macros took 45-60 s to compile, over half of a clean build's steps being tests
# (docs/benchmarks.md, "Build and test time"). -Og keeps the code debuggable and quick to
# build; -g0 because a failing test reports its assertion and line, not a backtrace. A Debug
# build, or -DJC_FULL_DEBUG_INFO=ON for a gdb session, builds them as everything else.
set(JC_TEST_CODEGEN)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND NOT CMAKE_BUILD_TYPE STREQUAL "Debug" AND NOT JC_FULL_DEBUG_INFO)
  set(JC_TEST_CODEGEN -Og -g0)
endif()

# jc_library(name SRCS ... DEPS ...)
function(jc_library name)
  cmake_parse_arguments(ARG "" "" "SRCS;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SRCS})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_compile_options(${name} PRIVATE ${JC_WARNINGS})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
endfunction()

# Whether any of `srcs` (paths relative to the current source directory), or a header
# under tests/ they include, reaches the test store (tests/testing/test_store.h and the
# fixtures built on it, or JC_TEST_STORE itself): a test binary that does not runs the same
# whatever the suite's store, so scripts/test.sh runs it once, on SQLite's pass. Read at
# configure time (a fresh clone's, as CI's, always): a test that starts to use the store
# in a configured tree is labelled again by the next cmake run.
function(jc_uses_test_store out)
  set(store_marks "test_store\\.h|test_system\\.h|server_processes\\.h|JC_TEST_STORE|JC_TEST_PG_URI")
  set(queue)
  foreach(src ${ARGN})
    list(APPEND queue "${CMAKE_CURRENT_SOURCE_DIR}/${src}")
  endforeach()
  set(seen)
  while(queue)
    list(POP_FRONT queue file)
    if(file IN_LIST seen OR NOT EXISTS "${file}")
      continue()
    endif()
    list(APPEND seen "${file}")
    file(STRINGS "${file}" lines REGEX "${store_marks}|#include \"")
    foreach(line ${lines})
      if(line MATCHES "${store_marks}")
        set(${out} TRUE PARENT_SCOPE)
        return()
      endif()
      if(line MATCHES "#include \"(tests/[^\"]+)\"")
        list(APPEND queue "${PROJECT_SOURCE_DIR}/${CMAKE_MATCH_1}")
      elseif(line MATCHES "#include \"([^\"/]+\\.h)\"")
        get_filename_component(dir "${file}" DIRECTORY)
        list(APPEND queue "${dir}/${CMAKE_MATCH_1}")
      endif()
    endforeach()
  endwhile()
  set(${out} FALSE PARENT_SCOPE)
endfunction()

# jc_test(name SRCS ... DEPS ... [PREFIX "text: "] [LOCK resource]): a Catch2 v2 binary
# registered with CTest, one CTest test per test case; PREFIX tells apart binaries that share
# test cases (the adapter conformance kit); LOCK names a resource its test cases hold alone
# (ctest -j runs them one at a time: the test Slurm cluster's one node, which tests fill);
# PROPS: more CTest properties for its test cases (a later TIMEOUT overrides 120 s). A
# binary with test cases of a minute or more says so with COST (seconds, about): ctest -j
# starts the costliest first, so they do not run alone at the end of the suite. ctest's own
# record of past times (Testing/Temporary/CTestCostData.txt) cannot help: it splits a line
# at spaces and so never matches our test names, and a fresh clone has none anyway.
# Every test binary shares one precompiled main (jc_catch_main).
function(jc_test name)
  cmake_parse_arguments(ARG "" "PREFIX;LOCK" "SRCS;DEPS;PROPS" ${ARGN})
  set(lock)
  if(ARG_LOCK)
    set(lock RESOURCE_LOCK ${ARG_LOCK})
  endif()
  add_executable(${name} ${ARG_SRCS})
  target_compile_options(${name} PRIVATE ${JC_WARNINGS} ${JC_TEST_CODEGEN})
  target_link_libraries(${name} PRIVATE jc_catch_main ${ARG_DEPS})
  jc_uses_test_store(uses_store ${ARG_SRCS})
  set(labels)
  if(NOT uses_store)
    set(labels LABELS store_independent)
  endif()
  # -w NoTests: a test name that matches nothing fails instead of passing vacuously.
  catch_discover_tests(${name} EXTRA_ARGS -w NoTests TEST_PREFIX "${ARG_PREFIX}"
                       PROPERTIES TIMEOUT 120 ${lock} ${labels} ${ARG_PROPS})
endfunction()
