#include "tools/jcctl/cli.h"

#include <algorithm>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace jc::jcctl {

namespace {

const FlagSpec* FindFlag(const std::vector<FlagSpec>& flags, const std::string& name, char short_name) {
  for (const auto& f : flags) {
    if ((!name.empty() && f.name == name) || (short_name != 0 && f.short_name == short_name)) return &f;
  }
  return nullptr;
}

std::string FlagLine(const FlagSpec& f) {
  std::string left = f.short_name != 0 ? absl::StrCat("  -", std::string(1, f.short_name), ", --", f.name)
                                       : absl::StrCat("      --", f.name);
  if (f.takes_value) absl::StrAppend(&left, " VALUE");
  if (left.size() < 30) left.resize(30, ' ');
  return absl::StrCat(left, " ", f.help, "\n");
}

std::set<std::string> Groups(const std::vector<CommandSpec>& commands) {
  std::set<std::string> out;
  for (const auto& c : commands) out.insert(c.path[0]);
  return out;
}

}  // namespace

const std::vector<FlagSpec>& GlobalFlags() {
  static const auto* flags = new std::vector<FlagSpec>{
      {"server", 's', true, "the gateway's URL (default: $JCCTL_SERVER, the config file, http://127.0.0.1:8080)"},
      {"token", 0, true, "bearer token (default: $JCCTL_TOKEN, the config file's token or token_file)"},
      {"config", 0, true, "config file (default: $JCCTL_CONFIG or ~/.config/jcctl/config.yaml)"},
      {"ca_file", 0, true, "PEM file of the CA that signed an https gateway's certificate"},
      {"output", 'o', true, "table (default), json, yaml or csv"},
      {"help", 'h', false, "show help"},
  };
  return *flags;
}

absl::StatusOr<Parsed> Parse(const std::vector<CommandSpec>& commands, const std::vector<std::string>& argv) {
  Parsed parsed;
  std::vector<std::string> positional;
  std::vector<std::pair<std::string, std::string>> raw_flags;  // name or "-c", value
  // First pass: split words from flags; a flag's value is taken once the command is known
  // (whether it takes one depends on the command), so keep the raw order.
  std::vector<std::string> tokens = argv;
  // The command: the longest prefix of non-flag words that names one.
  std::vector<std::string> words;
  for (const auto& t : tokens) {
    if (t == "--") break;
    if (!t.empty() && t[0] == '-') continue;
    words.push_back(t);
  }
  if (!words.empty() && words[0] == "help") {
    parsed.help = true;
    parsed.words.assign(words.begin() + 1, words.end());
    return parsed;
  }
  const CommandSpec* command = nullptr;
  for (const auto& c : commands) {
    if (words.size() >= c.path.size() && std::equal(c.path.begin(), c.path.end(), words.begin())) {
      if (command == nullptr || c.path.size() > command->path.size()) command = &c;
    }
  }
  std::vector<FlagSpec> known = GlobalFlags();
  if (command != nullptr) known.insert(known.end(), command->flags.begin(), command->flags.end());
  size_t command_words = command != nullptr ? command->path.size() : 0;
  size_t seen_words = 0;
  bool only_args = false;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& t = tokens[i];
    if (only_args || t.empty() || t[0] != '-' || t == "-") {
      if (seen_words++ < command_words) continue;  // a command word
      positional.push_back(t);
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
      flag = FindFlag(known, name, 0);
    } else {
      if (t.size() > 2 && t[2] == '=') {
        value = t.substr(3);
        has_value = true;
      } else if (t.size() > 2) {
        value = t.substr(2);  // -ojson
        has_value = true;
      }
      flag = FindFlag(known, "", t[1]);
    }
    if (flag == nullptr) {
      if (command == nullptr && !words.empty()) break;  // the unknown command is the error
      return absl::InvalidArgumentError(absl::StrCat("unknown flag ", t, command != nullptr
                                                                           ? absl::StrCat(" for \"jcctl ", absl::StrJoin(command->path, " "), "\"")
                                                                           : "",
                                                     "; see --help"));
    }
    if (flag->name == "help") {
      parsed.help = true;
      continue;
    }
    if (flag->takes_value && !has_value) {
      if (i + 1 >= tokens.size()) return absl::InvalidArgumentError(absl::StrCat("flag --", flag->name, " needs a value"));
      value = tokens[++i];
    } else if (!flag->takes_value) {
      if (has_value && value != "true" && value != "false") {
        return absl::InvalidArgumentError(absl::StrCat("flag --", flag->name, " takes no value"));
      }
      if (!has_value) value = "true";
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
          "; see jcctl ", words[0], " --help"));
    }
    return absl::InvalidArgumentError(absl::StrCat("unknown command \"", words[0], "\"; see jcctl --help"));
  }
  int n = static_cast<int>(positional.size());
  std::string name = absl::StrJoin(command->path, " ");
  if (n < command->min_args) {
    return absl::InvalidArgumentError(absl::StrCat("jcctl ", name, " needs ", command->args_usage, "; see jcctl ", name,
                                                   " --help"));
  }
  if (n > command->max_args) {
    return absl::InvalidArgumentError(absl::StrCat("jcctl ", name, ": unexpected argument \"",
                                                   positional[command->max_args], "\"; see jcctl ", name, " --help"));
  }
  parsed.command = command;
  parsed.invocation.args = positional;
  return parsed;
}

std::string CommandHelp(const CommandSpec& c) {
  std::string out = absl::StrCat("Usage: jcctl ", absl::StrJoin(c.path, " "), c.args_usage.empty() ? "" : " ",
                                 c.args_usage, " [flags]\n\n", c.summary, "\n");
  if (!c.flags.empty()) {
    out += "\nFlags:\n";
    for (const auto& f : c.flags) out += FlagLine(f);
  }
  out += "\nGlobal flags:\n";
  for (const auto& f : GlobalFlags()) out += FlagLine(f);
  return out;
}

std::string Help(const std::vector<CommandSpec>& commands, const std::vector<std::string>& words) {
  for (const auto& c : commands) {
    if (c.path == words) return CommandHelp(c);
  }
  std::string group = words.empty() ? "" : words[0];
  std::string out;
  if (group.empty()) {
    out =
        "jcctl: the Jointcloud control plane from the command line (centers, specs, images, datasets, jobs,\n"
        "placement plans, usage, tokens) over its REST API.\n\nUsage: jcctl NOUN VERB [ARGS] [flags]\n\nCommands:\n";
  } else {
    out = absl::StrCat("Usage: jcctl ", group, " COMMAND [ARGS] [flags]\n\nCommands:\n");
  }
  for (const auto& c : commands) {
    if (!group.empty() && c.path[0] != group) continue;
    std::string left = absl::StrCat("  ", absl::StrJoin(c.path, " "), c.args_usage.empty() ? "" : " ", c.args_usage);
    if (left.size() < 34) left.resize(34, ' ');
    absl::StrAppend(&out, left, " ", c.summary.substr(0, c.summary.find('\n')), "\n");
  }
  out += "\nGlobal flags:\n";
  for (const auto& f : GlobalFlags()) out += FlagLine(f);
  out +=
      "\nExit codes: 0 done; 1 the server refused or failed (or a watched job failed); 2 bad usage or input;\n"
      "3 the server cannot be reached; 4 not authenticated or not allowed; 5 not found.\n"
      "Run \"jcctl COMMAND --help\" for a command's flags.\n";
  return out;
}

absl::StatusOr<std::string> Completion(const std::vector<CommandSpec>& commands, const std::string& shell) {
  if (shell != "bash" && shell != "zsh") {
    return absl::InvalidArgumentError(absl::StrCat("completion: \"", shell, "\" is not a shell jcctl knows (bash, zsh)"));
  }
  std::set<std::string> groups = Groups(commands);
  std::string out = "# jcctl completion (generated by `jcctl completion " + shell + "`)\n";
  if (shell == "zsh") out += "autoload -U +X bashcompinit && bashcompinit\n";
  out += "_jcctl() {\n  local cur=\"${COMP_WORDS[COMP_CWORD]}\"\n  local words=\"\"\n";
  out += "  if [ \"$COMP_CWORD\" -eq 1 ]; then words=\"" + absl::StrJoin(groups, " ") + " help\"\n";
  out += "  elif [ \"$COMP_CWORD\" -eq 2 ]; then\n    case \"${COMP_WORDS[1]}\" in\n";
  for (const auto& g : groups) {
    std::vector<std::string> verbs;
    for (const auto& c : commands) {
      if (c.path[0] == g && c.path.size() > 1) verbs.push_back(c.path[1]);
    }
    out += "      " + g + ") words=\"" + absl::StrJoin(verbs, " ") + "\" ;;\n";
  }
  out += "    esac\n  fi\n  if [[ \"$cur\" == -* ]]; then\n    case \"${COMP_WORDS[1]} ${COMP_WORDS[2]}\" in\n";
  std::vector<std::string> global;
  for (const auto& f : GlobalFlags()) global.push_back("--" + f.name);
  for (const auto& c : commands) {
    std::vector<std::string> flags = global;
    for (const auto& f : c.flags) flags.push_back("--" + f.name);
    std::string pattern = c.path.size() > 1 ? "\"" + absl::StrJoin(c.path, " ") + "\"" : "\"" + c.path[0] + " \"*";
    out += "      " + pattern + ") words=\"" + absl::StrJoin(flags, " ") + "\" ;;\n";
  }
  out += "      *) words=\"" + absl::StrJoin(global, " ") + "\" ;;\n    esac\n  fi\n";
  out += "  COMPREPLY=( $(compgen -W \"$words\" -- \"$cur\") )\n}\ncomplete -F _jcctl jcctl\n";
  return out;
}

}  // namespace jc::jcctl
