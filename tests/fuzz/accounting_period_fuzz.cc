// libFuzzer harness: accounting periods as callers write them in report, settlement and
// reconciliation requests (services/accounting/period.h): a month ("2026-11"), a day
// ("2026-11-26") or an RFC 3339 instant. Each parse returns a time or an error, never
// crashes; a period that parses is never empty or reversed.
#include <cstddef>
#include <cstdint>
#include <string>

#include "services/accounting/period.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto from = jc::accounting::ParseBound(text);
  auto to = jc::accounting::ParseEndBound(text);
  Check(from.ok() == to.ok());  // the same forms for both ends
  if (from.ok()) Check(*from <= *to);
  if (auto month = jc::accounting::ParseMonth(text); month.ok()) {
    Check(month->first < month->second);
    Check(from.ok() && *from == month->first && *to == month->second);
  }
  // A "from..to" range as reports take it, split at the first '/'.
  if (size_t slash = text.find('/'); slash != std::string::npos) {
    (void)jc::accounting::ParseBound(text.substr(0, slash));
    (void)jc::accounting::ParseEndBound(text.substr(slash + 1));
  }
  return 0;
}
