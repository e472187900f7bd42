// jcctl: the Jointcloud control plane from the command line, over its REST API.
//
// Where it connects and as whom comes from, first to last: the flags (--server, --token,
// --ca_file), the environment ($JCCTL_SERVER, $JCCTL_TOKEN, $JCCTL_CA_FILE), the config
// file (--config, $JCCTL_CONFIG, or ~/.config/jcctl/config.yaml):
//   server: https://jointcloud.example.org:8443
//   token_file: ~/.config/jcctl/token     # or token: ...
//   ca_file: /etc/jointcloud/ca.pem
//   output: table

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <fstream>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "tools/jcctl/cli.h"
#include "tools/jcctl/commands.h"

namespace {

using jc::jcctl::ServerConfig;

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

std::string ExpandHome(const std::string& path) {
  if (path.rfind("~/", 0) == 0) return Env("HOME") + path.substr(1);
  return path;
}

// The config file's settings under the environment's and the flags'.
absl::StatusOr<ServerConfig> Resolve(const jc::jcctl::Invocation& inv, std::string* output) {
  ServerConfig config;
  std::string file = inv.Get("config", Env("JCCTL_CONFIG"));
  bool explicit_file = !file.empty();
  if (file.empty() && !Env("HOME").empty()) file = Env("HOME") + "/.config/jcctl/config.yaml";
  if (!file.empty()) {
    std::ifstream in(file);
    if (!in && explicit_file) {
      return absl::InvalidArgumentError(absl::StrCat("config: cannot read ", file));
    }
    if (in) {
      try {
        YAML::Node node = YAML::LoadFile(file);
        if (node && !node.IsMap() && !node.IsNull()) {
          return absl::InvalidArgumentError(absl::StrCat(file, ": the config is not a mapping (server:, token:, ...)"));
        }
        if (node["server"]) config.url = node["server"].as<std::string>();
        if (node["token"]) config.token = node["token"].as<std::string>();
        if (node["token_file"]) {
          std::string token_file = ExpandHome(node["token_file"].as<std::string>());
          std::ifstream t(token_file);
          if (!t || !(t >> config.token)) {
            return absl::InvalidArgumentError(absl::StrCat(file, ": token_file ", token_file, " cannot be read"));
          }
        }
        if (node["ca_file"]) config.ca_file = ExpandHome(node["ca_file"].as<std::string>());
        if (node["output"]) *output = node["output"].as<std::string>();
      } catch (const YAML::Exception& e) {
        return absl::InvalidArgumentError(absl::StrCat(file, ": malformed YAML at line ", e.mark.line + 1, ": ", e.msg));
      }
    }
  }
  if (!Env("JCCTL_SERVER").empty()) config.url = Env("JCCTL_SERVER");
  if (!Env("JCCTL_TOKEN").empty()) config.token = Env("JCCTL_TOKEN");
  if (!Env("JCCTL_CA_FILE").empty()) config.ca_file = Env("JCCTL_CA_FILE");
  if (inv.Has("server")) config.url = inv.Get("server");
  if (inv.Has("token")) config.token = inv.Get("token");
  if (inv.Has("ca_file")) config.ca_file = inv.Get("ca_file");
  if (inv.Has("output")) *output = inv.Get("output");
  // A bare host:port means http.
  if (config.url.find("://") == std::string::npos) config.url = "http://" + config.url;
  return config;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<jc::jcctl::CommandSpec> commands = jc::jcctl::Commands();
  // Completion is generated from the table, so it is a command only here.
  commands.push_back({{"completion"}, "SHELL", "A completion script for SHELL, bash or zsh: source <(jcctl completion bash)", {}, 1, 1,
                      nullptr});
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 1 && args[0] == "--version") args[0] = "version";
  auto parsed = jc::jcctl::Parse(commands, args);
  if (!parsed.ok()) {
    std::cerr << "jcctl: " << parsed.status().message() << "\n";
    return 2;
  }
  if (parsed->help) {
    std::cout << jc::jcctl::Help(commands, parsed->words);
    return 0;
  }
  const auto& inv = parsed->invocation;
  if (parsed->command->path[0] == "completion") {
    auto script = jc::jcctl::Completion(commands, inv.args[0]);
    if (!script.ok()) {
      std::cerr << "jcctl: " << script.status().message() << "\n";
      return 2;
    }
    std::cout << *script;
    return 0;
  }
  std::string output;
  auto config = Resolve(inv, &output);
  if (!config.ok()) {
    std::cerr << "jcctl: " << config.status().message() << "\n";
    return 2;
  }
  auto format = jc::jcctl::ParseFormat(output);
  if (!format.ok()) {
    std::cerr << "jcctl: " << format.status().message() << "\n";
    return 2;
  }
  jc::jcctl::Context ctx(*config, *format, std::cout, std::cerr);
  return parsed->command->run(ctx, inv);
}
