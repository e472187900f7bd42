#include "common/cli/shell_words.h"

#include "absl/strings/str_cat.h"

namespace jc::cli {

absl::StatusOr<std::vector<ShellWord>> SplitShellWords(absl::string_view line) {
  std::vector<ShellWord> words;
  size_t i = 0;
  const size_t n = line.size();
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (i < n) {
    if (blank(line[i])) {
      ++i;
      continue;
    }
    ShellWord word;
    word.start = i;
    while (i < n && !blank(line[i])) {
      const char c = line[i];
      if (c == '\'') {
        const size_t close = line.find('\'', i + 1);
        if (close == absl::string_view::npos) {
          return absl::InvalidArgumentError(absl::StrCat("a single quote at column ", i + 1, " is never closed"));
        }
        absl::StrAppend(&word.text, line.substr(i + 1, close - i - 1));
        i = close + 1;
      } else if (c == '"') {
        const size_t open = i++;
        while (i < n && line[i] != '"') {
          if (line[i] == '\\' && i + 1 < n &&
              (line[i + 1] == '"' || line[i + 1] == '\\' || line[i + 1] == '$' || line[i + 1] == '`' ||
               line[i + 1] == '\n')) {
            if (line[i + 1] != '\n') word.text.push_back(line[i + 1]);
            i += 2;
            continue;
          }
          word.text.push_back(line[i++]);
        }
        if (i >= n) {
          return absl::InvalidArgumentError(absl::StrCat("a double quote at column ", open + 1, " is never closed"));
        }
        ++i;  // the closing quote
      } else if (c == '\\') {
        if (i + 1 >= n) return absl::InvalidArgumentError("the line ends with a backslash");
        word.text.push_back(line[i + 1]);
        i += 2;
      } else {
        word.text.push_back(c);
        ++i;
      }
    }
    words.push_back(std::move(word));
  }
  return words;
}

}  // namespace jc::cli
