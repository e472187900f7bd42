// A job pack's line split as sh splits words (common/cli/shell_words.h).
#include "common/cli/shell_words.h"

#include <catch2/catch.hpp>

namespace jc::cli {
namespace {

std::vector<std::string> Texts(absl::string_view line) {
  auto words = SplitShellWords(line);
  INFO(line);
  REQUIRE(words.ok());
  std::vector<std::string> out;
  for (const auto& w : *words) out.push_back(w.text);
  return out;
}

TEST_CASE("a pack line's words are split as sh splits them, without expansion, each knowing where it started [B11]") {
  CHECK(Texts("  -n 2 -J train   python train.py ") == std::vector<std::string>{"-n", "2", "-J", "train", "python",
                                                                               "train.py"});
  CHECK(Texts(R"(-R "select[mem>1024] rusage[gpu=1]" -o 'out %J' x)") ==
        std::vector<std::string>{"-R", "select[mem>1024] rusage[gpu=1]", "-o", "out %J", "x"});
  CHECK(Texts(R"(a"b c"'d e'f)") == std::vector<std::string>{"ab cd ef"});
  CHECK(Texts(R"("a \"q\" \\ \$HOME \n")") == std::vector<std::string>{R"(a "q" \ $HOME \n)"});
  CHECK(Texts(R"(a\ b \'c)") == std::vector<std::string>{"a b", "'c"});
  CHECK(Texts("$HOME *.txt ~") == std::vector<std::string>{"$HOME", "*.txt", "~"});  // no expansion
  CHECK(Texts("").empty());
  CHECK(Texts(" \t ").empty());
  CHECK(Texts("''") == std::vector<std::string>{""});

  auto words = SplitShellWords(R"(-J "a b" -- echo hi > out)");
  REQUIRE(words.ok());
  REQUIRE(words->size() == 7);
  CHECK((*words)[1].start == 3);
  CHECK((*words)[3].start == 12);  // echo: the command is the line from here, verbatim
}

TEST_CASE("a pack line with a quote never closed or a trailing backslash is refused, saying where [B11]") {
  auto open_single = SplitShellWords("-J 'oops x");
  REQUIRE_FALSE(open_single.ok());
  CHECK(open_single.status().message() == "a single quote at column 4 is never closed");
  auto open_double = SplitShellWords(R"(x "a \")");
  REQUIRE_FALSE(open_double.ok());
  CHECK(open_double.status().message() == "a double quote at column 3 is never closed");
  auto backslash = SplitShellWords("x \\");
  REQUIRE_FALSE(backslash.ok());
  CHECK(backslash.status().message() == "the line ends with a backslash");
}

}  // namespace
}  // namespace jc::cli
