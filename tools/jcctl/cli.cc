#include "tools/jcctl/cli.h"

namespace jc::jcctl {

const cli::Tool& Tool() {
  static const auto* tool = new cli::Tool{
      "jcctl",
      "jcctl: the Jointcloud control plane from the command line (centers, specs, images, datasets, jobs,\n"
      "placement plans, usage, tokens) over its REST API.",
      "NOUN VERB [ARGS] [flags]",
      {
          {"server", 's', true, "the gateway's URL (default: $JCCTL_SERVER, the config file, http://127.0.0.1:8080)"},
          {"token", 0, true, "bearer token (default: $JCCTL_TOKEN, the config file's token or token_file)"},
          {"config", 0, true, "config file (default: $JCCTL_CONFIG or ~/.config/jcctl/config.yaml)"},
          {"ca_file", 0, true, "PEM file of the CA that signed an https gateway's certificate"},
          {"output", 'o', true, "table (default), json, yaml or csv"},
          {"help", 'h', false, "show help"},
      },
      "\nExit codes: 0 done; 1 the server refused or failed (or a watched job failed); 2 bad usage or input;\n"
      "3 the server cannot be reached; 4 not authenticated or not allowed; 5 not found.\n"
      "Run \"jcctl COMMAND --help\" for a command's flags.\n",
      "ids",
      {{"\"job get\"|\"job history\"|\"job watch\"|\"job logs\"|\"job stop\"|\"job scale\"|\"job explain\"", "jobs"},
       {"\"center get\"|\"center delete\"|\"center update\"|\"center heartbeat\"|\"center usage\"|\"reconcile \"*",
        "centers"},
       {"\"spec get\"|\"spec update\"|\"spec delete\"|\"spec price\"", "specs"},
       {"\"image get\"|\"image update\"|\"image delete\"", "images"},
       {"\"user get\"|\"user delete\"|\"member set\"|\"member remove\"", "users"},
       {"\"project get\"|\"project delete\"|\"quota set\"|\"budget set\"", "projects"},
       {"\"token revoke\"", "tokens"}}};
  return *tool;
}

absl::StatusOr<Parsed> Parse(const std::vector<CommandSpec>& commands, const std::vector<std::string>& argv) {
  auto parsed = cli::Parse(Tool(), cli::Infos(commands), argv);
  if (!parsed.ok()) return parsed.status();
  Parsed out;
  out.command = parsed->command >= 0 ? &commands[static_cast<size_t>(parsed->command)] : nullptr;
  out.invocation = std::move(parsed->invocation);
  out.help = parsed->help;
  out.words = std::move(parsed->words);
  return out;
}

std::string Help(const std::vector<CommandSpec>& commands, const std::vector<std::string>& words) {
  return cli::Help(Tool(), cli::Infos(commands), words);
}

absl::StatusOr<std::string> Completion(const std::vector<CommandSpec>& commands, const std::string& shell) {
  return cli::Completion(Tool(), cli::Infos(commands), shell);
}

}  // namespace jc::jcctl
