#include "executor/reqstr/requirement.h"

#include <cctype>
#include <cmath>
#include <limits>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "common/utf8.h"

namespace jc::nexec {
namespace {

enum class Tok {
  kEnd, kNumber, kName, kString, kLBracket, kRBracket, kLBrace, kRBrace, kLParen, kRParen,
  kComma, kColon, kEq, kEqEq, kNe, kGt, kGe, kLt, kLe, kAnd, kOr, kNot, kMinus, kPlus
};

struct Token {
  Tok kind;
  std::string text;
  int column;  // 1-based
};

const char* Describe(Tok t) {
  switch (t) {
    case Tok::kEnd: return "end of string";
    case Tok::kNumber: return "a number";
    case Tok::kName: return "a name";
    case Tok::kString: return "a quoted string";
    case Tok::kLBracket: return "'['";
    case Tok::kRBracket: return "']'";
    case Tok::kLBrace: return "'{'";
    case Tok::kRBrace: return "'}'";
    case Tok::kLParen: return "'('";
    case Tok::kRParen: return "')'";
    case Tok::kComma: return "','";
    case Tok::kColon: return "':'";
    case Tok::kEq: return "'='";
    case Tok::kEqEq: return "'=='";
    case Tok::kNe: return "'!='";
    case Tok::kGt: return "'>'";
    case Tok::kGe: return "'>='";
    case Tok::kLt: return "'<'";
    case Tok::kLe: return "'<='";
    case Tok::kAnd: return "'&&'";
    case Tok::kOr: return "'||'";
    case Tok::kNot: return "'!'";
    case Tok::kMinus: return "'-'";
    case Tok::kPlus: return "'+'";
  }
  return "?";
}

// The character that starts `s`, as a message may quote it: the whole of a UTF-8 sequence
// (a message is a protobuf string, which must be UTF-8: one byte of "é" made a job pack's
// answer unreadable, attacker helper-78), \xNN for a byte that starts none or a control.
std::string CharacterAt(absl::string_view s) {
  uint32_t code_point = 0;
  const int length = jc::Utf8Sequence(s, &code_point);
  if (length == 0 || code_point < 0x20 || code_point == 0x7f) {
    return absl::StrFormat("\\x%02x", static_cast<unsigned char>(s[0]));
  }
  return std::string(s.substr(0, static_cast<size_t>(length)));
}

absl::Status ErrorAt(int column, absl::string_view message) {
  return absl::InvalidArgumentError(
      absl::StrCat("resource requirement, column ", column, ": ", message));
}

absl::StatusOr<std::vector<Token>> Lex(absl::string_view s) {
  std::vector<Token> out;
  size_t i = 0;
  auto two = [&](char a, char b) { return i + 1 < s.size() && s[i] == a && s[i + 1] == b; };
  while (i < s.size()) {
    char c = s[i];
    int col = static_cast<int>(i) + 1;
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) ||
        (c == '.' && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1])))) {
      size_t j = i;
      while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '.')) ++j;
      out.push_back({Tok::kNumber, std::string(s.substr(i, j - i)), col});
      i = j;
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      out.push_back({Tok::kName, std::string(s.substr(i, j - i)), col});
      i = j;
      continue;
    }
    if (c == '"' || c == '\'') {
      size_t j = s.find(c, i + 1);
      if (j == absl::string_view::npos) return ErrorAt(col, "unterminated quoted string");
      out.push_back({Tok::kString, std::string(s.substr(i + 1, j - i - 1)), col});
      i = j + 1;
      continue;
    }
    Tok kind;
    int len = 1;
    if (two('=', '=')) kind = Tok::kEqEq, len = 2;
    else if (two('!', '=')) kind = Tok::kNe, len = 2;
    else if (two('>', '=')) kind = Tok::kGe, len = 2;
    else if (two('<', '=')) kind = Tok::kLe, len = 2;
    else if (two('&', '&')) kind = Tok::kAnd, len = 2;
    else if (two('|', '|')) kind = Tok::kOr, len = 2;
    else {
      switch (c) {
        case '[': kind = Tok::kLBracket; break;
        case ']': kind = Tok::kRBracket; break;
        case '{': kind = Tok::kLBrace; break;
        case '}': kind = Tok::kRBrace; break;
        case '(': kind = Tok::kLParen; break;
        case ')': kind = Tok::kRParen; break;
        case ',': kind = Tok::kComma; break;
        case ':': kind = Tok::kColon; break;
        case '=': kind = Tok::kEq; break;
        case '>': kind = Tok::kGt; break;
        case '<': kind = Tok::kLt; break;
        case '!': kind = Tok::kNot; break;
        case '-': kind = Tok::kMinus; break;
        case '+': kind = Tok::kPlus; break;
        default:
          return ErrorAt(col, absl::StrCat("unexpected character '", CharacterAt(s.substr(i)), "'"));
      }
    }
    out.push_back({kind, std::string(s.substr(i, len)), col});
    i += len;
  }
  out.push_back({Tok::kEnd, "", static_cast<int>(s.size()) + 1});
  return out;
}

const std::set<std::string>& PartKeywords() {
  static const auto* k = new std::set<std::string>{"select", "order", "rusage", "span", "same"};
  return *k;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  absl::StatusOr<Requirement> Parse() {
    Requirement req;
    if (Peek().kind == Tok::kNumber && Peek(1).kind == Tok::kLBrace) {
      req.multi_section = true;
      int64_t total_slots = 0;  // bounded so that TotalSlots() stays an int
      while (Peek().kind != Tok::kEnd) {
        const Token& count = Peek();
        if (count.kind != Tok::kNumber) {
          return ErrorAt(count.column, absl::StrCat("expected a slot count before '{', found ",
                                                    Found(count)));
        }
        int slots = 0;
        if (!absl::SimpleAtoi(count.text, &slots) || slots < 1) {
          return ErrorAt(count.column, absl::StrCat("slot count must be a whole number of at "
                                                    "least 1, found \"", count.text, "\""));
        }
        total_slots += slots;
        if (total_slots > std::numeric_limits<int>::max()) {
          return ErrorAt(count.column, absl::StrCat("the sections' slot counts add up past ",
                                                    std::numeric_limits<int>::max()));
        }
        Next();
        JC_RETURN_IF_ERROR(Expect(Tok::kLBrace, "after the slot count"));
        JC_ASSIGN_OR_RETURN(Section section, ParseSection(Tok::kRBrace));
        section.slots = slots;
        JC_RETURN_IF_ERROR(Expect(Tok::kRBrace, "to close the section"));
        req.sections.push_back(std::move(section));
      }
      return req;
    }
    JC_ASSIGN_OR_RETURN(Section section, ParseSection(Tok::kEnd));
    req.sections.push_back(std::move(section));
    return req;
  }

 private:
  const Token& Peek(size_t ahead = 0) const {
    return t_[std::min(pos_ + ahead, t_.size() - 1)];
  }
  const Token& Next() { return t_[std::min(pos_++, t_.size() - 1)]; }
  static std::string Found(const Token& t) {
    if (t.kind == Tok::kEnd) return "the end of the string";
    return absl::StrCat("\"", t.text, "\"");
  }
  absl::Status Expect(Tok kind, absl::string_view context) {
    if (Peek().kind != kind) {
      return ErrorAt(Peek().column, absl::StrCat("expected ", Describe(kind), " ", context,
                                                 ", found ", Found(Peek())));
    }
    Next();
    return absl::OkStatus();
  }

  absl::StatusOr<Section> ParseSection(Tok end) {
    Section s;
    std::set<std::string> seen;
    bool any = false;
    while (Peek().kind != end) {
      const Token& head = Peek();
      if (head.kind == Tok::kEnd) {
        return ErrorAt(head.column, "expected '}' to close the section, found the end of the string");
      }
      bool keyword = head.kind == Tok::kName && PartKeywords().count(head.text) &&
                     Peek(1).kind == Tok::kLBracket;
      if (!keyword) {
        if (any) {
          return ErrorAt(head.column,
                         absl::StrCat("expected select[, order[, rusage[, span[ or same[, found ",
                                      Found(head)));
        }
        // A leading bare expression is the select section.
        JC_ASSIGN_OR_RETURN(auto expr, ParseOr());
        s.select = std::move(expr);
        seen.insert("select");
        any = true;
        continue;
      }
      std::string part = head.text;
      if (part != "select" && !seen.insert(part).second) {
        return ErrorAt(head.column, absl::StrCat(part, "[...] appears twice in one section"));
      }
      Next();
      Next();  // '['
      if (part == "select") {
        JC_ASSIGN_OR_RETURN(auto expr, ParseOr());
        // Several select parts must all hold.
        if (s.select != nullptr) {
          auto both = std::make_unique<Expr>(Expr{Expr::Kind::kAnd});
          both->lhs = std::make_unique<Expr>(CloneExpr(*s.select));
          both->rhs = std::move(expr);
          s.select = std::move(both);
        } else {
          s.select = std::move(expr);
        }
        seen.insert("select");
      } else if (part == "order") {
        JC_RETURN_IF_ERROR(ParseOrder(&s));
      } else if (part == "rusage") {
        JC_RETURN_IF_ERROR(ParseRusage(&s));
      } else if (part == "span") {
        JC_RETURN_IF_ERROR(ParseSpan(&s));
      } else {
        JC_RETURN_IF_ERROR(ParseSame(&s));
      }
      JC_RETURN_IF_ERROR(Expect(Tok::kRBracket, absl::StrCat("to close ", part, "[")));
      any = true;
    }
    return s;
  }

  static Expr CloneExpr(const Expr& e) {
    Expr c{e.kind, e.number, e.text};
    if (e.lhs) c.lhs = std::make_unique<Expr>(CloneExpr(*e.lhs));
    if (e.rhs) c.rhs = std::make_unique<Expr>(CloneExpr(*e.rhs));
    return c;
  }

  absl::StatusOr<std::unique_ptr<Expr>> ParseOr() {
    JC_ASSIGN_OR_RETURN(auto lhs, ParseAnd());
    while (Peek().kind == Tok::kOr) {
      Next();
      JC_ASSIGN_OR_RETURN(auto rhs, ParseAnd());
      auto e = std::make_unique<Expr>(Expr{Expr::Kind::kOr});
      e->lhs = std::move(lhs);
      e->rhs = std::move(rhs);
      lhs = std::move(e);
    }
    return lhs;
  }

  absl::StatusOr<std::unique_ptr<Expr>> ParseAnd() {
    JC_ASSIGN_OR_RETURN(auto lhs, ParseUnary());
    while (Peek().kind == Tok::kAnd) {
      Next();
      JC_ASSIGN_OR_RETURN(auto rhs, ParseUnary());
      auto e = std::make_unique<Expr>(Expr{Expr::Kind::kAnd});
      e->lhs = std::move(lhs);
      e->rhs = std::move(rhs);
      lhs = std::move(e);
    }
    return lhs;
  }

  absl::StatusOr<std::unique_ptr<Expr>> ParseUnary() {
    if (Peek().kind == Tok::kNot) {
      JC_RETURN_IF_ERROR(Deeper(Next().column));
      JC_ASSIGN_OR_RETURN(auto inner, ParseUnary());
      --depth_;
      auto e = std::make_unique<Expr>(Expr{Expr::Kind::kNot});
      e->lhs = std::move(inner);
      return e;
    }
    JC_ASSIGN_OR_RETURN(auto lhs, ParsePrimary());
    Tok op = Peek().kind;
    if (op == Tok::kEqEq || op == Tok::kEq || op == Tok::kNe || op == Tok::kGt ||
        op == Tok::kGe || op == Tok::kLt || op == Tok::kLe) {
      std::string text = op == Tok::kEq ? "==" : Next().text;
      if (op == Tok::kEq) Next();
      JC_ASSIGN_OR_RETURN(auto rhs, ParsePrimary());
      auto e = std::make_unique<Expr>(Expr{Expr::Kind::kCompare});
      e->text = text;
      e->lhs = std::move(lhs);
      e->rhs = std::move(rhs);
      return e;
    }
    return lhs;
  }

  absl::StatusOr<std::unique_ptr<Expr>> ParsePrimary() {
    const Token& t = Peek();
    switch (t.kind) {
      case Tok::kNumber: {
        double v = 0;
        if (!absl::SimpleAtod(t.text, &v)) {
          return ErrorAt(t.column, absl::StrCat("\"", t.text, "\" is not a number"));
        }
        Next();
        auto e = std::make_unique<Expr>(Expr{Expr::Kind::kNumber});
        e->number = v;
        return e;
      }
      case Tok::kString: {
        auto e = std::make_unique<Expr>(Expr{Expr::Kind::kString});
        e->text = Next().text;
        return e;
      }
      case Tok::kName: {
        if (t.text == "defined" && Peek(1).kind == Tok::kLParen) {
          Next();
          Next();
          if (Peek().kind != Tok::kName) {
            return ErrorAt(Peek().column, absl::StrCat("expected a resource name in defined(), "
                                                       "found ", Found(Peek())));
          }
          auto e = std::make_unique<Expr>(Expr{Expr::Kind::kDefined});
          e->text = Next().text;
          JC_RETURN_IF_ERROR(Expect(Tok::kRParen, "to close defined("));
          return e;
        }
        auto e = std::make_unique<Expr>(Expr{Expr::Kind::kName});
        e->text = Next().text;
        return e;
      }
      case Tok::kLParen: {
        JC_RETURN_IF_ERROR(Deeper(Next().column));
        JC_ASSIGN_OR_RETURN(auto inner, ParseOr());
        JC_RETURN_IF_ERROR(Expect(Tok::kRParen, "to close '('"));
        --depth_;
        return inner;
      }
      default:
        return ErrorAt(t.column, absl::StrCat("expected a resource name, number or '(' in the "
                                              "select expression, found ", Found(t)));
    }
  }

  // Items separated by ',' or ':' up to ']'.
  template <typename Fn>
  absl::Status ParseList(absl::string_view what, Fn item) {
    if (Peek().kind == Tok::kRBracket) {
      return ErrorAt(Peek().column, absl::StrCat(what, "[] is empty"));
    }
    while (true) {
      JC_RETURN_IF_ERROR(item());
      if (Peek().kind == Tok::kComma || Peek().kind == Tok::kColon) {
        Next();
        continue;
      }
      return absl::OkStatus();
    }
  }

  absl::StatusOr<std::string> ExpectName(absl::string_view context) {
    if (Peek().kind != Tok::kName) {
      return ErrorAt(Peek().column, absl::StrCat("expected a resource name ", context,
                                                 ", found ", Found(Peek())));
    }
    return Next().text;
  }

  absl::StatusOr<double> ExpectNumber(absl::string_view context) {
    const Token& t = Peek();
    double v = 0;
    if (t.kind != Tok::kNumber || !absl::SimpleAtod(t.text, &v)) {
      return ErrorAt(t.column, absl::StrCat("expected a number ", context, ", found ", Found(t)));
    }
    Next();
    return v;
  }

  absl::Status ParseOrder(Section* s) {
    return ParseList("order", [&]() -> absl::Status {
      OrderKey key;
      if (Peek().kind == Tok::kMinus || Peek().kind == Tok::kPlus) {
        key.descending = Next().kind == Tok::kPlus;
      }
      JC_ASSIGN_OR_RETURN(key.resource, ExpectName("in order[]"));
      s->order.push_back(std::move(key));
      return absl::OkStatus();
    });
  }

  absl::Status ParseRusage(Section* s) {
    return ParseList("rusage", [&]() -> absl::Status {
      int col = Peek().column;
      JC_ASSIGN_OR_RETURN(std::string name, ExpectName("in rusage[]"));
      JC_RETURN_IF_ERROR(Expect(Tok::kEq, absl::StrCat("after \"", name, "\" in rusage[]")));
      JC_ASSIGN_OR_RETURN(double v, ExpectNumber(absl::StrCat("for ", name, " in rusage[]")));
      if (!s->rusage.emplace(name, v).second) {
        return ErrorAt(col, absl::StrCat(name, " appears twice in rusage[]"));
      }
      return absl::OkStatus();
    });
  }

  absl::Status ParseSpan(Section* s) {
    int col = Peek().column;
    JC_ASSIGN_OR_RETURN(std::string key, ExpectName("in span[] (hosts or ptile)"));
    JC_RETURN_IF_ERROR(Expect(Tok::kEq, absl::StrCat("after \"", key, "\" in span[]")));
    int vcol = Peek().column;
    JC_ASSIGN_OR_RETURN(double v, ExpectNumber(absl::StrCat("for ", key, " in span[]")));
    if (v != std::floor(v) || v < 1) {
      return ErrorAt(vcol, absl::StrCat("span[", key, "=...] must be a whole number of at least 1"));
    }
    // Found by the fuzzer: a number past int's range made the cast undefined.
    if (v > 1'000'000) return ErrorAt(vcol, absl::StrCat("span[", key, "=...] must be at most 1000000"));
    if (key == "hosts") {
      if (v != 1) return ErrorAt(vcol, "span[hosts=...] supports only 1 (all slots on one host)");
      s->span_hosts = 1;
    } else if (key == "ptile") {
      s->ptile = static_cast<int>(v);
    } else {
      return ErrorAt(col, absl::StrCat("span[] takes hosts=1 or ptile=n, not \"", key, "\""));
    }
    return absl::OkStatus();
  }

  absl::Status ParseSame(Section* s) {
    return ParseList("same", [&]() -> absl::Status {
      JC_ASSIGN_OR_RETURN(std::string name, ExpectName("in same[]"));
      s->same.push_back(std::move(name));
      return absl::OkStatus();
    });
  }

  // Entered '(' and '!' now: each is a recursion, and a submitter writes the string
  // (`((((...` overflowed the stack: found by tests/fuzz/requirement_fuzz).
  absl::Status Deeper(int column) {
    if (++depth_ > kMaxNesting) {
      return ErrorAt(column, absl::StrCat("expressions nest at most ", kMaxNesting, " deep"));
    }
    return absl::OkStatus();
  }
  static constexpr int kMaxNesting = 32;
  int depth_ = 0;
  std::vector<Token> t_;
  size_t pos_ = 0;
};

std::string FormatNumber(double v) {
  if (v == std::floor(v) && std::abs(v) < 1e15) return absl::StrCat(static_cast<int64_t>(v));
  return absl::StrCat(v);
}

using Value = std::variant<std::monostate, double, std::string, bool>;

// An unknown name keeps its spelling so a comparison can read it as a string literal.
struct Evaluated {
  Value value;
  std::string unknown_name;
};

Evaluated Eval(const Expr& e, const ResourceValues& host);

bool Truthy(const Evaluated& v) {
  if (auto* d = std::get_if<double>(&v.value)) return *d != 0;
  if (auto* b = std::get_if<bool>(&v.value)) return *b;
  if (auto* s = std::get_if<std::string>(&v.value)) return !s->empty();
  return false;
}

template <typename T>
bool Compare(const T& a, const T& b, const std::string& op) {
  if (op == "==") return a == b;
  if (op == "!=") return a != b;
  if (op == ">") return a > b;
  if (op == ">=") return a >= b;
  if (op == "<") return a < b;
  return a <= b;
}

Evaluated Eval(const Expr& e, const ResourceValues& host) {
  switch (e.kind) {
    case Expr::Kind::kNumber: return {e.number, ""};
    case Expr::Kind::kString: return {e.text, ""};
    case Expr::Kind::kName: {
      auto it = host.find(e.text);
      if (it == host.end()) return {std::monostate{}, e.text};
      return std::visit([](const auto& v) { return Evaluated{Value(v), ""}; }, it->second);
    }
    case Expr::Kind::kDefined: return {host.count(e.text) > 0, ""};
    case Expr::Kind::kNot: return {!Truthy(Eval(*e.lhs, host)), ""};
    case Expr::Kind::kAnd: return {Truthy(Eval(*e.lhs, host)) && Truthy(Eval(*e.rhs, host)), ""};
    case Expr::Kind::kOr: return {Truthy(Eval(*e.lhs, host)) || Truthy(Eval(*e.rhs, host)), ""};
    case Expr::Kind::kCompare: {
      Evaluated a = Eval(*e.lhs, host);
      Evaluated b = Eval(*e.rhs, host);
      // `type==x86_64`: an unknown name compared with text is that text.
      if (std::holds_alternative<std::monostate>(a.value) && !a.unknown_name.empty() &&
          std::holds_alternative<std::string>(b.value)) {
        a.value = a.unknown_name;
      }
      if (std::holds_alternative<std::monostate>(b.value) && !b.unknown_name.empty() &&
          std::holds_alternative<std::string>(a.value)) {
        b.value = b.unknown_name;
      }
      auto num = [](const Value& v) -> std::optional<double> {
        if (auto* d = std::get_if<double>(&v)) return *d;
        if (auto* t = std::get_if<bool>(&v)) return *t ? 1.0 : 0.0;
        return std::nullopt;
      };
      if (auto* sa = std::get_if<std::string>(&a.value)) {
        if (auto* sb = std::get_if<std::string>(&b.value)) return {Compare(*sa, *sb, e.text), ""};
        return {false, ""};
      }
      auto na = num(a.value);
      auto nb = num(b.value);
      if (na && nb) return {Compare(*na, *nb, e.text), ""};
      return {false, ""};
    }
  }
  return {false, ""};
}

}  // namespace

int Requirement::TotalSlots() const {
  int total = 0;
  for (const auto& s : sections) total += s.slots;
  return total;
}

absl::StatusOr<Requirement> ParseRequirement(absl::string_view text) {
  // Bounded, so that no submitter can make the parser (or the trees it builds) recurse
  // the master's stack away.
  if (text.size() > kMaxRequirementLength) {
    return absl::InvalidArgumentError(absl::StrCat("requirement string: at most ", kMaxRequirementLength,
                                                   " characters, got ", text.size()));
  }
  JC_ASSIGN_OR_RETURN(std::vector<Token> tokens, Lex(text));
  Parser parser(std::move(tokens));
  return parser.Parse();
}

std::string ToString(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::kNumber: return FormatNumber(e.number);
    case Expr::Kind::kString: return absl::StrCat("\"", e.text, "\"");
    case Expr::Kind::kName: return e.text;
    case Expr::Kind::kDefined: return absl::StrCat("defined(", e.text, ")");
    case Expr::Kind::kNot: return absl::StrCat("!", ToString(*e.lhs));
    case Expr::Kind::kAnd: return absl::StrCat("(", ToString(*e.lhs), " && ", ToString(*e.rhs), ")");
    case Expr::Kind::kOr: return absl::StrCat("(", ToString(*e.lhs), " || ", ToString(*e.rhs), ")");
    case Expr::Kind::kCompare: return absl::StrCat(ToString(*e.lhs), e.text, ToString(*e.rhs));
  }
  return "";
}

std::string ToString(const Requirement& r) {
  std::vector<std::string> sections;
  for (const Section& s : r.sections) {
    std::vector<std::string> parts;
    if (s.select) parts.push_back(absl::StrCat("select[", ToString(*s.select), "]"));
    if (!s.order.empty()) {
      std::vector<std::string> keys;
      for (const auto& k : s.order) keys.push_back(absl::StrCat(k.descending ? "" : "-", k.resource));
      parts.push_back(absl::StrCat("order[", absl::StrJoin(keys, ":"), "]"));
    }
    if (!s.rusage.empty()) {
      std::vector<std::string> items;
      for (const auto& [k, v] : s.rusage) items.push_back(absl::StrCat(k, "=", FormatNumber(v)));
      parts.push_back(absl::StrCat("rusage[", absl::StrJoin(items, ","), "]"));
    }
    if (s.span_hosts) parts.push_back("span[hosts=1]");
    if (s.ptile) parts.push_back(absl::StrCat("span[ptile=", *s.ptile, "]"));
    if (!s.same.empty()) parts.push_back(absl::StrCat("same[", absl::StrJoin(s.same, ":"), "]"));
    std::string body = absl::StrJoin(parts, " ");
    sections.push_back(r.multi_section ? absl::StrCat(s.slots, "{", body, "}") : body);
  }
  return absl::StrJoin(sections, " ");
}

bool EvaluateSelect(const Expr& expr, const ResourceValues& host) {
  return Truthy(Eval(expr, host));
}

}  // namespace jc::nexec
