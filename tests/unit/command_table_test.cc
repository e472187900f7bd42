// The command table jcctl and nexec share (common/cli/command_table.h).
#include "common/cli/command_table.h"

#include <catch2/catch.hpp>

namespace jc::cli {
namespace {

struct Ctx {};

Tool TestTool() {
  return Tool{"tool", "", "COMMAND [flags]",
              {{"server", 's', true, "where"}, {"json", 0, false, "json"}, {"help", 'h', false, "help"}}, ""};
}

std::vector<Command<Ctx>> Table() {
  std::vector<Command<Ctx>> c;
  c.push_back({{"center", "list"}, "", "List centers", {{"region", 0, true, "only this region"}}, 0, 0, nullptr});
  c.push_back({{"center", "get"}, "CENTER", "One center", {}, 1, 1, nullptr});
  c.push_back({{"submit"},
               "COMMAND...",
               "Submit",
               {FlagSpec{"n", 'n', true, "slots"}, FlagSpec{"Ep", 0, true, "post-exec", true},
                FlagSpec{"I", 'I', false, "interactive"}, FlagSpec{"Ip", 0, false, "pty", true},
                FlagSpec{"E", 'E', true, "pre-exec"}},
               1,
               100,
               nullptr,
               /*args_end_flags=*/true});
  return c;
}

TEST_CASE("global flags go before the command as well as after it, with their values [B11]") {
  auto table = Table();
  for (const auto& argv : std::vector<std::vector<std::string>>{{"-s", "http://h:1", "center", "list"},
                                                                {"--server", "http://h:1", "center", "list"},
                                                                {"center", "list", "-s", "http://h:1"},
                                                                {"--server=http://h:1", "center", "list"}}) {
    auto parsed = Parse(TestTool(), Infos(table), argv);
    INFO(argv[0] << " " << argv[1]);
    REQUIRE(parsed.ok());
    REQUIRE(parsed->command == 0);
    CHECK(parsed->invocation.Get("server") == "http://h:1");
    CHECK(parsed->invocation.args.empty());
  }
}

TEST_CASE("a boolean flag given =false is not given, =true is, and any other value is refused [B11]") {
  auto table = Table();
  auto off = Parse(TestTool(), Infos(table), {"center", "list", "--json=false"});
  REQUIRE(off.ok());
  CHECK_FALSE(off->invocation.Has("json"));  // it printed JSON (attacker helper-79)
  auto on = Parse(TestTool(), Infos(table), {"center", "list", "--json=true"});
  REQUIRE(on.ok());
  CHECK(on->invocation.Has("json"));
  CHECK_FALSE(Parse(TestTool(), Infos(table), {"center", "list", "--json=yes"}).ok());
}

TEST_CASE("LSF's one-dash flags are whole words, one-letter flags take attached values, and a command line after "
          "the first argument is the command's own [B11]") {
  auto table = Table();
  auto parsed = Parse(TestTool(), Infos(table),
                      {"submit", "-n", "2", "-Ep", "cleanup", "-Ip", "-Efirst", "mpirun", "-n", "4", "--json"});
  REQUIRE(parsed.ok());
  REQUIRE(parsed->command == 2);
  const Invocation& in = parsed->invocation;
  CHECK(in.Get("n") == "2");
  CHECK(in.Get("Ep") == "cleanup");  // not -E with the value "p"
  CHECK(in.Has("Ip"));
  CHECK_FALSE(in.Has("I"));
  CHECK(in.Get("E") == "first");
  CHECK_FALSE(in.Has("json"));  // after the command: the command's
  CHECK(in.args == std::vector<std::string>{"mpirun", "-n", "4", "--json"});
  // A one-letter flag has no long spelling.
  CHECK_FALSE(Parse(TestTool(), Infos(table), {"submit", "--n", "2", "true"}).ok());
}

TEST_CASE("command-line mistakes say what is wrong, naming the tool [B11][C5]") {
  auto table = Table();
  auto message = [&](std::vector<std::string> argv) {
    auto parsed = Parse(TestTool(), Infos(table), argv);
    REQUIRE_FALSE(parsed.ok());
    return std::string(parsed.status().message());
  };
  CHECK(message({"centre", "list"}) == "unknown command \"centre\"; see tool --help");
  CHECK(message({"center", "lst"}) == "unknown command \"center lst\"; see tool center --help");
  CHECK(message({"center", "get"}) == "tool center get needs CENTER; see tool center get --help");
  CHECK(message({"center", "get", "a", "b"}) == "tool center get: unexpected argument \"b\"; see tool center get --help");
  CHECK(message({"center", "list", "--zone", "x"}) == "unknown flag --zone for \"tool center list\"; see --help");
  CHECK(message({"center", "list", "--region"}) == "flag --region needs a value");
  CHECK(message({"center", "list", "--json=maybe"}) == "flag --json takes no value");
  // An empty argument is a variable a failed command never set (`jcctl job watch "$job"`).
  CHECK(message({"center", "get", ""}) == "tool center get: CENTER is empty (\"\"): was it set by a command that failed?");
  CHECK(message({"submit", ""}) == "tool submit: COMMAND is empty (\"\"): was it set by a command that failed?");
  // A command line's own words may be empty after its first.
  auto echo = Parse(TestTool(), Infos(table), {"submit", "echo", ""});
  REQUIRE(echo.ok());
  CHECK(echo->invocation.args == std::vector<std::string>{"echo", ""});
  auto help = Parse(TestTool(), Infos(table), {"center", "get", "--help"});
  REQUIRE(help.ok());
  CHECK(help->help);
  CHECK(Help(TestTool(), Infos(table), help->words).rfind("Usage: tool center get CENTER [flags]", 0) == 0);
  auto script = Completion(TestTool(), Infos(table), "bash");
  REQUIRE(script.ok());
  CHECK(script->find("complete -F _tool tool") != std::string::npos);
  CHECK(script->find("-Ep") != std::string::npos);
}

}  // namespace
}  // namespace jc::cli
