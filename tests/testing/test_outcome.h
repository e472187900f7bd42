// Whether the test case now running has failed, for fixtures' teardown.
#pragma once

#include <string>

namespace jc::testing {

// True once an assertion of the current test case failed (a CHECK, a REQUIRE, or an
// exception out of it). A fixture whose processes' logs explain a failure prints them in
// its teardown when this holds, before its directory goes: ctest keeps the output of a test
// that failed, so a failure seen once in CI can be read rather than guessed.
bool CurrentTestFailed();

// Prints to stderr the last `lines` lines of every log file directly in `dir` (a name
// ending in ".log", or ".log.N" for a process's earlier run), each under its name.
void PrintLogTails(const std::string& dir, int lines = 80);

}  // namespace jc::testing
