#include "executor/policy/limits.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace jc::nexec {
namespace {

// The bracket groups of a value text: "[a] [b c]" -> {"a", "b c"}; none -> the text itself.
absl::StatusOr<std::vector<std::string>> Groups(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  if (text.empty()) return absl::InvalidArgumentError("empty value");
  if (text.front() != '[') return std::vector<std::string>{std::string(text)};
  std::vector<std::string> out;
  while (!text.empty()) {
    if (text.front() != '[') {
      return absl::InvalidArgumentError(absl::StrCat("expected '[' at \"", text, "\""));
    }
    size_t close = text.find(']');
    if (close == absl::string_view::npos) return absl::InvalidArgumentError("a '[' without its ']'");
    out.emplace_back(absl::StripAsciiWhitespace(text.substr(1, close - 1)));
    text = absl::StripLeadingAsciiWhitespace(text.substr(close + 1));
  }
  return out;
}

absl::StatusOr<LimitValue::Part> ParsePart(absl::string_view number, absl::string_view windows,
                                          absl::string_view whole) {
  LimitValue::Part part;
  if (!absl::SimpleAtod(number, &part.value) || part.value < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", whole, "\": \"", number, "\" is not a non-negative number"));
  }
  auto w = TimeWindows::Parse(windows);
  if (!w.ok()) return absl::InvalidArgumentError(absl::StrCat("\"", whole, "\": ", w.status().message()));
  part.windows = *std::move(w);
  return part;
}

}  // namespace

std::optional<double> LimitValue::At(absl::Time t, absl::TimeZone tz) const {
  for (const Part& p : parts) {
    if (p.windows.Contains(t, tz)) return p.value;
  }
  return std::nullopt;
}

absl::StatusOr<LimitValue> ParseLimitValue(absl::string_view text) {
  LimitValue out;
  out.text = std::string(absl::StripAsciiWhitespace(text));
  auto groups = Groups(text);
  if (!groups.ok()) return absl::InvalidArgumentError(absl::StrCat("\"", text, "\": ", groups.status().message()));
  for (const std::string& g : *groups) {
    // "2 1:8:0-5:18:0": the value, then its windows (none: always).
    size_t space = g.find_first_of(" \t");
    absl::string_view number = absl::string_view(g).substr(0, space);
    absl::string_view windows = space == std::string::npos ? "" : absl::string_view(g).substr(space + 1);
    const bool bracketed = absl::StartsWith(out.text, "[");
    auto part = ParsePart(number, windows, bracketed ? absl::StrCat("[", g, "]") : g);
    if (!part.ok()) return part.status();
    out.parts.push_back(*std::move(part));
  }
  return out;
}

absl::StatusOr<std::map<std::string, LimitValue>> ParseLimitResources(absl::string_view text) {
  std::map<std::string, LimitValue> out;
  auto groups = Groups(text);
  if (!groups.ok()) return absl::InvalidArgumentError(absl::StrCat("\"", text, "\": ", groups.status().message()));
  if (!absl::StartsWith(absl::StripAsciiWhitespace(text), "[")) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\": expected [resource,value] groups, e.g. [mem,5000] [gpu,2]"));
  }
  for (const std::string& g : *groups) {
    std::vector<absl::string_view> fields = absl::StrSplit(g, absl::MaxSplits(',', 1));
    if (fields.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat("\"[", g, "]\": expected [resource,value]"));
    }
    std::string name(absl::StripAsciiWhitespace(fields[0]));
    if (name.empty()) return absl::InvalidArgumentError(absl::StrCat("\"[", g, "]\": no resource name"));
    absl::string_view rest = absl::StripAsciiWhitespace(fields[1]);
    size_t space = rest.find_first_of(" \t");
    auto part = ParsePart(rest.substr(0, space), space == absl::string_view::npos ? "" : rest.substr(space + 1),
                          absl::StrCat("[", g, "]"));
    if (!part.ok()) return part.status();
    LimitValue& v = out[name];
    v.parts.push_back(*std::move(part));
    v.text = v.text.empty() ? absl::StrCat("[", g, "]") : absl::StrCat(v.text, " [", g, "]");
  }
  return out;
}

ConsumerSet ParseConsumers(absl::string_view text, bool per) {
  ConsumerSet c;
  c.given = true;
  c.per = per;
  c.text = std::string(absl::StripAsciiWhitespace(text));
  for (absl::string_view name : absl::StrSplit(text, absl::ByAnyChar(" \t,"), absl::SkipEmpty())) {
    if (name == "all") {
      c.all = true;
    } else if (absl::ConsumePrefix(&name, "~")) {
      c.excluded.insert(std::string(name));
    } else {
      c.names.insert(std::string(name));
    }
  }
  return c;
}

LimitValues ValuesAt(const LimitConfig& limit, absl::Time t, absl::TimeZone tz) {
  LimitValues v;
  if (limit.slots) v.slots = limit.slots->At(t, tz);
  if (limit.jobs) v.jobs = limit.jobs->At(t, tz);
  for (const auto& [name, value] : limit.resources) {
    if (auto now = value.At(t, tz)) v.resources[name] = *now;
  }
  return v;
}

}  // namespace jc::nexec
