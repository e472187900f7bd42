#pragma once

// What the scheduler's files share and nothing else sees (scheduler.cc and scheduler_*.cc).

#include "executor/reqstr/requirement.h"

namespace jc::nexec {

// A section's rusage[name] per slot, 0 when it asks for none.
inline double RusageOf(const Section& s, const char* name) {
  auto it = s.rusage.find(name);
  return it == s.rusage.end() ? 0 : it->second;
}

}  // namespace jc::nexec
