#pragma once

// Closing what a child inherited before it waits anywhere a file system can hold it: shared by
// nexec's agent (a task's child, the open-as-account helper) and the exec stream's child
// (`nexec exec`, the adapters' `jcctl job exec`).

#include <cstddef>

namespace jc {

// Closes every descriptor from 3 up but the `count` in `keep` (at most
// kMaxKeptDescriptors), and points stdin, stdout and stderr that `keep` does not name at
// /dev/null (replaced, not closed: the child's next open must not take their numbers).
// Async-signal-safe, for a child about to walk an account's paths: one the kernel holds
// there (given up) keeps only these, not the agent's listening socket and connections,
// which a child's copy held into the agent's next life (reviewer, session 82), nor the
// pipes the agent's own output goes to, whose reader (a supervisor, a test harness) would
// wait for their end as long as the child lives. A kernel without close_range (before
// 5.9): one by one, as /proc/self/fd lists them (reviewer helper-92). Where /dev/null
// cannot be opened, stdin, stdout and stderr stay as they are.
inline constexpr size_t kMaxKeptDescriptors = 8;
void CloseDescriptorsBut(const int* keep, size_t count);
// false: CloseDescriptorsBut goes as on a kernel without close_range (tests).
void UseCloseRange(bool use);

}  // namespace jc
