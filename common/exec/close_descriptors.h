#pragma once

// Closing what a child inherited before it waits anywhere a file system can hold it: shared by
// nexec's agent (a task's child, the open-as-account helper) and the exec stream's child
// (`nexec exec`, the adapters' `jcctl job exec`).

#include <cstddef>

namespace jc {

// Closes every descriptor from 3 up but the `count` in `keep` (at most
// kMaxKeptDescriptors; those below 3 are kept anyway). Async-signal-safe, for a child about
// to walk an account's paths: one the kernel holds there (given up) keeps only these, not
// the agent's listening socket and connections, which a child's copy held into the agent's
// next life (reviewer, session 82). A kernel without close_range (before 5.9): one by one,
// as /proc/self/fd lists them (reviewer helper-92).
inline constexpr size_t kMaxKeptDescriptors = 8;
void CloseDescriptorsBut(const int* keep, size_t count);
// false: CloseDescriptorsBut goes as on a kernel without close_range (tests).
void UseCloseRange(bool use);

}  // namespace jc
