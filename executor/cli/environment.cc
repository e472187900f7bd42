#include "executor/cli/environment.h"

#include "absl/strings/str_split.h"

extern char** environ;

namespace jc::nexec {

std::map<std::string, std::string> EnvironmentToSend(const std::string& which, std::ostream& warnings) {
  std::map<std::string, std::string> all;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    std::string name = entry.substr(0, eq);
    if (name.rfind("NEXEC_", 0) == 0) continue;
    all[name] = entry.substr(eq + 1);
  }
  if (which == "all") return all;
  std::map<std::string, std::string> chosen;
  if (which == "none") return chosen;
  for (absl::string_view name : absl::StrSplit(which, ',', absl::SkipEmpty())) {
    auto it = all.find(std::string(name));
    if (it == all.end()) {
      warnings << "nexec: warning: --env names " << name << ", which is not set here; skipped\n";
      continue;
    }
    chosen.insert(*it);
  }
  return chosen;
}

}  // namespace jc::nexec
