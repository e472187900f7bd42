#include "common/cli/command_table.h"

#include <algorithm>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/ascii.h"

namespace jc::cli {
namespace {

// A flag with only a one-letter name ("-n"): its name is that letter, and no "--n" exists.
bool ShortOnly(const FlagSpec& f) { return f.short_name != 0 && f.name.size() == 1 && f.name[0] == f.short_name; }

// A word exactly naming a single-dash flag ("-Ep") first; then "--name", then "-c".
const FlagSpec* FindFlag(const std::vector<FlagSpec>& flags, const std::string& name, char short_name,
                         bool single_dash) {
  for (const auto& f : flags) {
    if (single_dash ? (f.single_dash && f.name == name)
                    : ((!name.empty() && !f.single_dash && !ShortOnly(f) && f.name == name) || (short_name != 0 && f.short_name == short_name))) {
      return &f;
    }
  }
  return nullptr;
}

std::string Spelling(const FlagSpec& f) { return absl::StrCat(f.single_dash || ShortOnly(f) ? "-" : "--", f.name); }

std::string FlagLine(const FlagSpec& f) {
  std::string left = ShortOnly(f)          ? absl::StrCat("  ", Spelling(f))
                     : f.short_name != 0 ? absl::StrCat("  -", std::string(1, f.short_name), ", ", Spelling(f))
                                         : absl::StrCat("      ", Spelling(f));
  if (f.takes_value) absl::StrAppend(&left, " VALUE");
  if (left.size() < 30) left.resize(30, ' ');
  return absl::StrCat(left, " ", f.help, "\n");
}

std::set<std::string> Groups(const std::vector<CommandInfo>& commands) {
  std::set<std::string> out;
  for (const auto& c : commands) {
    if (c.path.size() > 1) out.insert(c.path[0]);
  }
  return out;
}

std::string Name(const CommandInfo& c) { return absl::StrJoin(c.path, " "); }

}  // namespace

absl::StatusOr<Parsed> Parse(const Tool& tool, const std::vector<CommandInfo>& commands,
                             const std::vector<std::string>& argv) {
  Parsed parsed;
  std::vector<std::string> positional;
  // The command: the longest run of the leading non-flag words that names one. A word
  // after a flag may be that flag's value, so flags with values are skipped with theirs
  // where the flag is global (the only ones that may come before the command).
  std::vector<std::string> words;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& t = argv[i];
    if (t == "--") break;
    if (!t.empty() && t[0] == '-' && t != "-") {
      const bool dashdash = absl::StartsWith(t, "--");
      const std::string name = dashdash ? t.substr(2, t.find('=') == std::string::npos ? std::string::npos : t.find('=') - 2)
                                        : t.substr(1);
      const FlagSpec* global = dashdash ? FindFlag(tool.global_flags, name, 0, false)
                                        : (FindFlag(tool.global_flags, name, 0, true) != nullptr
                                               ? FindFlag(tool.global_flags, name, 0, true)
                                               : (t.size() == 2 ? FindFlag(tool.global_flags, "", t[1], false) : nullptr));
      if (global != nullptr && global->takes_value && t.find('=') == std::string::npos && (dashdash || t.size() == 2)) ++i;
      continue;
    }
    words.push_back(t);
  }
  if (!words.empty() && words[0] == "help") {
    parsed.help = true;
    parsed.words.assign(words.begin() + 1, words.end());
    return parsed;
  }
  int command_index = -1;
  for (size_t k = 0; k < commands.size(); ++k) {
    const CommandInfo& c = commands[k];
    if (words.size() >= c.path.size() && std::equal(c.path.begin(), c.path.end(), words.begin())) {
      if (command_index < 0 || c.path.size() > commands[command_index].path.size()) command_index = static_cast<int>(k);
    }
  }
  const CommandInfo* command = command_index >= 0 ? &commands[command_index] : nullptr;
  std::vector<FlagSpec> known = tool.global_flags;
  if (command != nullptr) known.insert(known.end(), command->flags.begin(), command->flags.end());
  const size_t command_words = command != nullptr ? command->path.size() : 0;
  size_t seen_words = 0;
  bool only_args = false;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& t = argv[i];
    if (only_args || t.empty() || t[0] != '-' || t == "-") {
      if (!only_args && seen_words < command_words) {
        ++seen_words;  // a command word
        continue;
      }
      positional.push_back(t);
      if (command != nullptr && command->args_end_flags) only_args = true;
      continue;
    }
    if (t == "--") {
      only_args = true;
      continue;
    }
    std::string name, value;
    bool has_value = false;
    const FlagSpec* flag = nullptr;
    if (absl::StartsWith(t, "--")) {
      name = t.substr(2);
      if (auto eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        has_value = true;
      }
      flag = FindFlag(known, name, 0, false);
    } else if ((flag = FindFlag(known, t.substr(1), 0, true)) != nullptr) {
      name = t.substr(1);  // -Ep, -app
    } else {
      if (t.size() > 2 && t[2] == '=') {
        value = t.substr(3);
        has_value = true;
      } else if (t.size() > 2) {
        value = t.substr(2);  // -ojson
        has_value = true;
      }
      flag = FindFlag(known, "", t[1], false);
      if (flag != nullptr && !flag->takes_value && t.size() > 2) flag = nullptr;  // -xyz is not -x
    }
    if (flag == nullptr) {
      if (command == nullptr && !words.empty()) break;  // the unknown command is the error
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown flag ", t, command != nullptr ? absl::StrCat(" for \"", tool.name, " ", Name(*command), "\"") : "",
          "; see --help"));
    }
    if (flag->name == "help") {
      parsed.help = true;
      continue;
    }
    if (flag->takes_value && !has_value) {
      if (i + 1 >= argv.size()) {
        return absl::InvalidArgumentError(absl::StrCat("flag ", Spelling(*flag), " needs a value"));
      }
      value = argv[++i];
    } else if (!flag->takes_value) {
      if (has_value && value != "true" && value != "false") {
        return absl::InvalidArgumentError(absl::StrCat("flag ", Spelling(*flag), " takes no value"));
      }
      if (!has_value) value = "true";
      if (value == "false") {
        // --exclusive=false is the flag not given (attacker helper-79: it made an exclusive job).
        parsed.invocation.flags.erase(flag->name);
        continue;
      }
    }
    parsed.invocation.flags[flag->name] = value;
  }
  parsed.words = words;
  if (parsed.help) {
    if (command != nullptr) parsed.words = command->path;
    return parsed;
  }
  if (command == nullptr) {
    if (words.empty()) {
      parsed.help = true;
      return parsed;
    }
    std::set<std::string> groups = Groups(commands);
    if (groups.count(words[0]) > 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          words.size() > 1 ? absl::StrCat("unknown command \"", words[0], " ", words[1], "\"")
                           : absl::StrCat("\"", words[0], "\" needs a command"),
          "; see ", tool.name, " ", words[0], " --help"));
    }
    return absl::InvalidArgumentError(absl::StrCat("unknown command \"", words[0], "\"; see ", tool.name, " --help"));
  }
  const int n = static_cast<int>(positional.size());
  const std::string name = Name(*command);
  if (n < command->min_args) {
    return absl::InvalidArgumentError(absl::StrCat(tool.name, " ", name, " needs ", command->args_usage, "; see ",
                                                   tool.name, " ", name, " --help"));
  }
  if (n > command->max_args) {
    return absl::InvalidArgumentError(absl::StrCat(tool.name, " ", name, ": unexpected argument \"",
                                                   positional[command->max_args], "\"; see ", tool.name, " ", name,
                                                   " --help"));
  }
  // An empty argument is a variable that was never set, most often by a command that
  // failed (`job=$(jcctl job submit -q …)`): `jcctl job watch "$job"` would follow every
  // job. A command line to run (args_end_flags) may hold empty words after its first.
  std::vector<std::string> usage_words = absl::StrSplit(command->args_usage, ' ', absl::SkipEmpty());
  for (size_t k = 0; k < positional.size(); ++k) {
    if (!positional[k].empty() || (command->args_end_flags && k > 0)) continue;
    std::string what = k < usage_words.size() ? std::string(absl::StripAsciiWhitespace(usage_words[k]))
                                              : (usage_words.empty() ? "ARGUMENT" : usage_words.back());
    what.erase(std::remove_if(what.begin(), what.end(), [](char c) { return c == '[' || c == ']' || c == '.'; }),
               what.end());
    return absl::InvalidArgumentError(absl::StrCat(tool.name, " ", name, ": ", what,
                                                   " is empty (\"\"): was it set by a command that failed?"));
  }
  parsed.command = command_index;
  parsed.invocation.args = positional;
  return parsed;
}

std::string CommandHelp(const Tool& tool, const CommandInfo& c) {
  std::string out = absl::StrCat("Usage: ", tool.name, " ", Name(c), c.args_usage.empty() ? "" : " ", c.args_usage,
                                 " [flags]\n\n", c.summary, "\n");
  if (!c.flags.empty()) {
    out += "\nFlags:\n";
    for (const auto& f : c.flags) out += FlagLine(f);
  }
  out += "\nGlobal flags:\n";
  for (const auto& f : tool.global_flags) out += FlagLine(f);
  return out;
}

std::string Help(const Tool& tool, const std::vector<CommandInfo>& commands,
                 const std::vector<std::string>& words) {
  for (const auto& c : commands) {
    if (c.path == words) return CommandHelp(tool, c);
  }
  std::string group = words.empty() || Groups(commands).count(words[0]) == 0 ? "" : words[0];
  std::string out;
  if (group.empty()) {
    out = absl::StrCat(tool.description.empty() ? "" : tool.description + "\n\n", "Usage: ", tool.name, " ",
                       tool.usage, "\n\nCommands:\n");
  } else {
    out = absl::StrCat("Usage: ", tool.name, " ", group, " COMMAND [ARGS] [flags]\n\nCommands:\n");
  }
  for (const auto& c : commands) {
    if (!group.empty() && c.path[0] != group) continue;
    std::string left = absl::StrCat("  ", Name(c), c.args_usage.empty() ? "" : " ", c.args_usage);
    // Two spaces at least between a command and its summary, however long its usage.
    left.resize(std::max<size_t>(left.size() + 1, 34), ' ');
    absl::StrAppend(&out, left, " ", c.summary.substr(0, c.summary.find('\n')), "\n");
  }
  out += "\nGlobal flags:\n";
  for (const auto& f : tool.global_flags) out += FlagLine(f);
  out += tool.footer;
  return out;
}

absl::StatusOr<std::string> Completion(const Tool& tool, const std::vector<CommandInfo>& commands,
                                       const std::string& shell) {
  if (shell != "bash" && shell != "zsh") {
    return absl::InvalidArgumentError(
        absl::StrCat("completion: \"", shell, "\" is not a shell ", tool.name, " knows (bash, zsh)"));
  }
  std::set<std::string> first;
  for (const auto& c : commands) first.insert(c.path[0]);
  const std::string fn = "_" + tool.name;
  std::string out = absl::StrCat("# ", tool.name, " completion (generated by `", tool.name, " completion ", shell, "`)\n");
  if (shell == "zsh") out += "autoload -U +X bashcompinit && bashcompinit\n";
  out += fn + "() {\n  local cur=\"${COMP_WORDS[COMP_CWORD]}\"\n  local words=\"\"\n";
  out += "  if [ \"$COMP_CWORD\" -eq 1 ]; then words=\"" + absl::StrJoin(first, " ") + " help\"\n";
  out += "  elif [ \"$COMP_CWORD\" -eq 2 ]; then\n    case \"${COMP_WORDS[1]}\" in\n";
  for (const auto& g : Groups(commands)) {
    std::vector<std::string> verbs;
    for (const auto& c : commands) {
      if (c.path[0] == g && c.path.size() > 1) verbs.push_back(c.path[1]);
    }
    out += "      " + g + ") words=\"" + absl::StrJoin(verbs, " ") + "\" ;;\n";
  }
  out += "    esac\n  fi\n  if [[ \"$cur\" == -* ]]; then\n    case \"${COMP_WORDS[1]} ${COMP_WORDS[2]}\" in\n";
  std::vector<std::string> global;
  for (const auto& f : tool.global_flags) global.push_back(Spelling(f));
  for (const auto& c : commands) {
    std::vector<std::string> flags = global;
    for (const auto& f : c.flags) flags.push_back(Spelling(f));
    std::string pattern = c.path.size() > 1 ? "\"" + Name(c) + "\"" : "\"" + c.path[0] + " \"*";
    out += "      " + pattern + ") words=\"" + absl::StrJoin(flags, " ") + "\" ;;\n";
  }
  out += "      *) words=\"" + absl::StrJoin(global, " ") + "\" ;;\n    esac\n  fi\n";
  // A file after -f/--file; an argument the server knows (a job, a center, ...).
  out += "  case \"${COMP_WORDS[COMP_CWORD-1]}\" in\n    -f|--file) COMPREPLY=( $(compgen -f -- \"$cur\") ); return ;;\n"
         "  esac\n";
  if (!tool.ids_command.empty() && !tool.argument_ids.empty()) {
    out += "  if [ -z \"$words\" ] && [[ \"$cur\" != -* ]]; then\n    local kind=\"\"\n"
           "    case \"${COMP_WORDS[1]} ${COMP_WORDS[2]}\" in\n";
    for (const auto& [pattern, kind] : tool.argument_ids) out += "      " + pattern + ") kind=" + kind + " ;;\n";
    out += "    esac\n    [ -n \"$kind\" ] && words=\"$(" + tool.name + " " + tool.ids_command +
           " \"$kind\" 2>/dev/null)\"\n  fi\n";
  }
  out += "  COMPREPLY=( $(compgen -W \"$words\" -- \"$cur\") )\n}\ncomplete -F " + fn + " " + tool.name + "\n";
  return out;
}

}  // namespace jc::cli
