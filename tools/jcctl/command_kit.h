#pragma once

// The pieces jcctl's command files share: calling the server, listing every page, printing
// in the chosen format, and the usual command shapes (list, get, create from a file).

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "tools/jcctl/commands.h"

namespace jc::jcctl {

using Run = std::function<int(Context&, const Invocation&)>;

// A path segment or query value, percent-encoded.
std::string Escape(const std::string& text);
// Every page of a list: the items under `key`, following the next-page token.
absl::StatusOr<nlohmann::json> ListAll(Client* client, const std::string& path, const std::string& key, bool camel,
                                       size_t limit = 100000);
// Prints `value` in the context's format; `rows_of` picks the table's rows.
int Show(Context& ctx, const nlohmann::json& value, const std::vector<Column>& columns,
         const std::function<nlohmann::json(const nlohmann::json&)>& rows_of = nullptr);
// `run` with the client connected; a failure to connect is the command's answer.
Run WithClient(std::function<int(Context&, Client*, const Invocation&)> run);
// A list command: GET `path`, every page, as a table of `columns`.
Run ListCommand(std::string path, std::string key, bool camel, std::vector<Column> columns,
                std::function<std::string(const Invocation&)> query = nullptr);
// A create command: POST the file's document to `path`.
Run CreateCommand(std::string path, std::vector<Column> columns);
// A get command: GET `prefix`/ID, with `query` ("?..." from the flags) when given.
Run GetCommand(std::string prefix, std::vector<Column> columns,
               std::function<std::string(const Invocation&)> query = nullptr);
// --project of the image commands: image ids are unique within a project.
inline const FlagSpec kImageProject{"project", 0, true,
                                    "the image's project (\"-\": the federation's; default: yours, else the federation's)"};
// "?param=value&..." for the flags given.
std::string Query(const Invocation& inv, const std::vector<std::pair<std::string, std::string>>& flag_to_param);
// `more` and --limit.
std::vector<FlagSpec> ListFlags(std::vector<FlagSpec> more = {});

// The operator's commands (operator_commands.cc): users, projects, members, quotas,
// budgets; centers, specs and images updated and removed.
std::vector<CommandSpec> OperatorCommands();
// The commands that hold a connection to a running replica (session_commands.cc): job exec,
// job port-forward.
std::vector<CommandSpec> SessionCommands();

}  // namespace jc::jcctl
