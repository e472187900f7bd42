// jcctl as a user runs it: the real binary against the real `jointcloud` and a real
// adapter process over loopback (issue 16 item 1). Checks what is printed, and the exit
// codes scripts rely on (0 done, 1 refused or a watched job failed, 2 bad usage or input,
// 3 unreachable, 4 not allowed, 5 not found).

#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/testing/rest_client.h"
#include "tests/testing/server_processes.h"

using nlohmann::json;

namespace {

using jc::testing::Ran;

// Runs jcctl with `args` (and `env` added), as a shell would, with HOME at `dir` (no config
// file of the machine's user).
Ran Jcctl(const std::string& dir, std::vector<std::string> args, std::vector<std::string> env = {}) {
  args.insert(args.begin(), JC_JCCTL_BINARY);
  return jc::testing::RunCaptured(dir, args, env);
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int Lines(const std::string& text) { return static_cast<int>(std::count(text.begin(), text.end(), '\n')); }

std::string TempDir() {
  auto dir = std::filesystem::temp_directory_path() / ("jc-e2e-jcctl-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

}  // namespace

TEST_CASE("jcctl: bad input is one line on stderr and an exit code scripts can rely on", "[C8]") {
  std::string dir = TempDir();
  Write(dir + "/bad.yaml", "name: x\ntasks: [\n  - {name: t\n");
  Write(dir + "/empty.json", "  \n");
  struct Case {
    std::vector<std::string> args;
    int code;
    std::string says;
  } cases[] = {
      {{"frobnicate"}, 2, "unknown command \"frobnicate\""},
      {{"job", "frob"}, 2, "unknown command \"job frob\""},
      {{"job"}, 2, "\"job\" needs a command"},
      {{"job", "list", "--bogus"}, 2, "unknown flag --bogus"},
      {{"job", "get"}, 2, "needs JOB"},
      {{"job", "get", "a", "b"}, 2, "unexpected argument \"b\""},
      {{"job", "submit", "-f", dir + "/missing.yaml"}, 2, "cannot read it"},
      {{"job", "submit", "-f", dir + "/bad.yaml"}, 2, "malformed YAML at line"},
      {{"job", "submit", "-f", dir + "/empty.json"}, 2, "the file is empty"},
      {{"job", "submit"}, 2, "give the file with -f FILE"},
      {{"center", "list", "-o", "xml"}, 2, "is not a format"},
      {{"center", "list", "--server", "ftp://x"}, 2, "is not a URL"},
      {{"center", "list", "--server", "http://127.0.0.1:1"}, 3,
       "cannot reach the server at http://127.0.0.1:1: the connection was refused or the host cannot be reached"},
      // Global flags before the command too (issue 33: this said unknown command "http://...").
      {{"-s", "http://127.0.0.1:1", "center", "list"}, 3, "cannot reach the server at http://127.0.0.1:1"},
      {{"--server", "http://127.0.0.1:1", "job", "list"}, 3, "cannot reach the server at http://127.0.0.1:1"},
      {{"token", "create", "--ttl", "soon", "--server", "http://127.0.0.1:1"}, 2, "neither seconds nor a duration"},
      {{"center", "list", "--config", dir + "/nope.yaml"}, 2, "config: cannot read"},
      {{"completion", "fish"}, 2, "not a shell jcctl knows"},
      // `job=$(jcctl job submit -q …)` failed, then `jcctl job watch "$job"`: not every job.
      {{"job", "watch", ""}, 2, "JOB is empty"},
      {{"job", "stop", ""}, 2, "JOB is empty"},
      {{"dataset", "get", "imagenet", ""}, 2, "VERSION is empty"},
  };
  for (const auto& c : cases) {
    Ran r = Jcctl(dir, c.args);
    INFO(r.err);
    INFO(c.args[0] + (c.args.size() > 1 ? " " + c.args[1] : ""));
    CHECK(r.code == c.code);
    CHECK(Lines(r.err) == 1);
    CHECK(r.err.rfind("jcctl: ", 0) == 0);
    CHECK_THAT(r.err, Catch::Contains(c.says));
    CHECK(r.out.empty());
  }
  // Help everywhere, on stdout, exit 0.
  for (std::vector<std::string> args : {std::vector<std::string>{"--help"}, {"job", "--help"}, {"job", "submit", "--help"},
                                        {"help", "token", "create"}, {}}) {
    Ran r = Jcctl(dir, args);
    CHECK(r.code == 0);
    CHECK_THAT(r.out, Catch::Contains("Usage: jcctl"));
  }
  CHECK_THAT(Jcctl(dir, {"job", "logs", "--help"}).out, Catch::Contains("--follow"));
  // The completion script is valid bash and completes commands from the same table.
  Ran completion = Jcctl(dir, {"completion", "bash"});
  REQUIRE(completion.code == 0);
  Write(dir + "/completion.bash", completion.out);
  CHECK(std::system(("bash -n " + dir + "/completion.bash").c_str()) == 0);
  std::string probe = "source " + dir + "/completion.bash; COMP_WORDS=(jcctl job w); COMP_CWORD=2; _jcctl; "
                      "echo \"${COMPREPLY[@]}\" > " + dir + "/completed";
  CHECK(std::system(("bash -c '" + probe + "'").c_str()) == 0);
  CHECK(Slurp(dir + "/completed") == "watch\n");
  std::filesystem::remove_all(dir);
}

TEST_CASE("jcctl runs a job from a YAML file to its end against a real control plane and adapter", "[C8][A7]") {
  std::string dir = TempDir();
  int adapter_port_number = 0;
  auto adapter = jc::testing::StartLocalAdapterProcess(JC_ADAPTER_LOCAL, dir, "local", 4, &adapter_port_number);
  const std::string adapter_address = "127.0.0.1:" + std::to_string(adapter_port_number);
  auto started = jc::testing::StartServerProcess(JC_SERVER_BINARY, dir, "e2e_jcctl", "server.log");
  auto& server = *started.process;
  const std::string port = std::to_string(started.rest_port);
  std::string token = jc::testing::AdminToken(dir + "/admin.token");
  jc::testing::RestClient rest(started.rest_port, token);
  REQUIRE(jc::testing::AddCenterWithSpec(rest, "local", adapter_address, 4, 4096, "256Mi"));

  // Address and token from a config file, then from the environment.
  std::filesystem::create_directories(dir + "/.config/jcctl");
  Write(dir + "/token", token + "\n");
  Write(dir + "/.config/jcctl/config.yaml", "server: 127.0.0.1:" + port + "\ntoken_file: ~/token\n");
  Ran centers = Jcctl(dir, {"center", "list"});
  INFO(centers.err);
  REQUIRE(centers.code == 0);
  CHECK_THAT(centers.out, Catch::StartsWith("CENTER"));
  CHECK_THAT(centers.out, Catch::Contains("local"));
  std::filesystem::remove(dir + "/.config/jcctl/config.yaml");
  std::vector<std::string> env{"JCCTL_SERVER=http://127.0.0.1:" + port, "JCCTL_TOKEN=" + token};
  CHECK(Jcctl(dir, {"center", "list"}).code == 3);  // no config, no env: the default address has no server

  // What another party wrote reaches the terminal written out, never as its escape
  // sequences (helper-47 F3: a center's operator set its region to clear the screen and
  // retitle everyone's terminal on `jcctl center list`).
  REQUIRE(rest.Send("PATCH", "/openapi/v1/centers/local", R"({"region": "north\u001b]0;owned\u0007\u001b[2J\u009b"})")
              .http_status == 200);
  for (const char* format : {"table", "csv"}) {
    Ran shown = Jcctl(dir, {"center", "list", "-o", format}, env);
    INFO(format << ": " << shown.out << shown.err);
    CHECK(shown.code == 0);
    CHECK(shown.out.find('\x1b') == std::string::npos);
    CHECK(shown.out.find('\x07') == std::string::npos);
    CHECK(shown.out.find("\xc2\x9b") == std::string::npos);
    CHECK_THAT(shown.out, Catch::Contains(R"(north\x1b]0;owned\x07\x1b[2J\u009b)"));
  }

  Ran specs = Jcctl(dir, {"spec", "list"}, env);
  CHECK(specs.code == 0);
  CHECK_THAT(specs.out, Catch::Contains("cpu-1"));

  // A job from YAML: planned, submitted, watched to its end, then read back.
  Write(dir + "/job.yaml",
        "name: hello\n"
        "tasks:\n"
        "  - name: main\n"
        "    command: echo hello from $JC_TASK_INDEX; sleep 1\n"
        "    resourceSpecId: cpu-1\n");  // replicaNumber left out: one
  Ran plan = Jcctl(dir, {"plan", "-f", dir + "/job.yaml"}, env);
  INFO(plan.err);
  CHECK(plan.code == 0);
  CHECK_THAT(plan.out, Catch::Contains("Placed"));
  CHECK_THAT(plan.out, Catch::Contains("-> local"));

  // A misspelt field: the file's line, where it is, and the name meant.
  Write(dir + "/typo.yaml",
        "name: typo\n"
        "tasks:\n"
        "  - name: main\n"
        "    resourceSpecId: cpu-1\n"
        "    comand: 'true'\n");
  Ran typo = Jcctl(dir, {"job", "submit", "-f", dir + "/typo.yaml"}, env);
  CHECK(typo.code == 2);
  CHECK_THAT(typo.err, Catch::Contains("typo.yaml line 5: tasks[0].comand: no such field; did you mean \"command\"?"));
  // A field left out: the line of what holds it.
  Write(dir + "/nocommand.yaml", "name: x\ntasks:\n  - name: main\n    resourceSpecId: cpu-1\n");
  Ran no_command = Jcctl(dir, {"job", "submit", "-f", dir + "/nocommand.yaml"}, env);
  CHECK(no_command.code == 2);
  CHECK_THAT(no_command.err, Catch::Contains("nocommand.yaml line 3: tasks[0].command: a task needs a command"));

  // A job file from a FIFO is read once: the refusal comes, with no line (attacker's
  // review: jcctl read it again for the line and waited for ever).
  Ran fifo = jc::testing::RunCaptured(
      dir,
      {"bash", "-c",
       "cd " + dir + " && rm -f job.fifo && mkfifo job.fifo && "
       "(printf 'name: f\\ntasks:\\n  - {name: t, comand: x, resourceSpecId: cpu-1}\\n' > job.fifo &) && "
       "timeout 30 " + std::string(JC_JCCTL_BINARY) + " plan -f job.fifo; echo \"rc=$?\""},
      env);
  CHECK_THAT(fifo.out, Catch::Contains("rc=2"));
  CHECK_THAT(fifo.err, Catch::Contains("tasks[0].comand: no such field"));
  // What a file's key holds reaches the terminal as text: no escape sequence of it is sent.
  Write(dir + "/escape.yaml", "name: e\ntasks:\n  - name: t\n    \"x\\e]52;c;AAAA\\a\": 1\n");
  Ran escape = Jcctl(dir, {"job", "submit", "-f", dir + "/escape.yaml"}, env);
  CHECK(escape.code == 2);
  CHECK(escape.err.find('\x1b') == std::string::npos);
  CHECK(escape.err.find('\a') == std::string::npos);
  CHECK_THAT(escape.err, Catch::Contains("x\\x1b]52;c;AAAA\\x07"));

  // --project and the file's own project must agree.
  Write(dir + "/vision.yaml", "name: v\nproject: vision\ntasks: [{name: t, command: 'true', resourceSpecId: cpu-1}]\n");
  Ran clash = Jcctl(dir, {"job", "submit", "-f", dir + "/vision.yaml", "--project", "nlp"}, env);
  CHECK(clash.code == 2);
  CHECK_THAT(clash.err, Catch::Contains("the file names project \"vision\" and --project says \"nlp\""));

  Ran submitted = Jcctl(dir, {"job", "submit", "-f", dir + "/job.yaml", "-o", "json"}, env);
  INFO(submitted.err);
  REQUIRE(submitted.code == 0);
  std::string job = json::parse(submitted.out)["jobId"];
  REQUIRE(!job.empty());

  Ran watched = Jcctl(dir, {"job", "watch", job}, env);
  INFO(watched.out + watched.err);
  CHECK(watched.code == 0);
  CHECK_THAT(watched.out, Catch::Contains(job));
  CHECK_THAT(watched.out, Catch::Contains("ended  completed"));
  CHECK_THAT(watched.out, Catch::Contains("@local"));

  Ran got = Jcctl(dir, {"job", "get", job}, env);
  CHECK(got.code == 0);
  CHECK_THAT(got.out, Catch::Contains("Status:         completed"));
  CHECK_THAT(got.out, Catch::Contains("local"));
  Ran as_yaml = Jcctl(dir, {"job", "get", job, "-o", "yaml"}, env);
  CHECK(as_yaml.code == 0);
  CHECK_THAT(as_yaml.out, Catch::Contains("status: \"completed\""));

  // Completion knows the server's ids and the files at hand: bash itself, with the script
  // `jcctl completion bash` prints, completes `jcctl job get <TAB>` to this job.
  Ran ids = Jcctl(dir, {"ids", "jobs"}, env);
  CHECK(ids.code == 0);
  CHECK_THAT(ids.out, Catch::Contains(job + "\n"));
  CHECK(Jcctl(dir, {"ids", "widgets"}, env).code == 2);
  Ran script = Jcctl(dir, {"completion", "bash"}, env);
  REQUIRE(script.code == 0);
  Write(dir + "/complete.bash", script.out);
  std::vector<std::string> shell_env = env;
  shell_env.push_back("PATH=" + std::filesystem::path(JC_JCCTL_BINARY).parent_path().string() + ":" +
                      std::getenv("PATH"));
  auto complete = [&](const std::string& words, int cword) {
    return jc::testing::RunCaptured(
        dir, {"bash", "-c",
              "cd " + dir + " && source complete.bash && COMP_WORDS=(" + words + ") && COMP_CWORD=" +
                  std::to_string(cword) + " && _jcctl && printf '%s\\n' \"${COMPREPLY[@]}\""},
        shell_env);
  };
  Ran job_ids = complete("jcctl job get ''", 3);
  INFO(job_ids.out + job_ids.err);
  CHECK_THAT(job_ids.out, Catch::Contains(job));
  Ran center_ids = complete("jcctl reconcile lo", 2);
  CHECK_THAT(center_ids.out, Catch::Contains("local"));
  Ran files = complete("jcctl job submit -f jo", 4);
  CHECK_THAT(files.out, Catch::Contains("job.yaml"));

  // Its history (A7): the one attempt, where and when it ran, for how long, how it ended.
  Ran history = Jcctl(dir, {"job", "history", job}, env);
  INFO(history.out + history.err);
  CHECK(history.code == 0);
  CHECK_THAT(history.out, Catch::Matches("TASK +REPLICA +ATTEMPT +CENTER +PLACED +STARTED +ENDED +ELAPSED +OUTCOME +EXIT +MESSAGE\n0 +0 +0 +local +2[-0-9]+T[:0-9]+Z +2[-0-9]+T[:0-9]+Z +2[-0-9]+T[:0-9]+Z +[12]s +succeeded +0 +-\n"));
  CHECK_THAT(history.out, Catch::Contains("succeeded"));
  CHECK_THAT(history.out, Catch::Contains(" local "));
  Ran history_json = Jcctl(dir, {"job", "history", job, "-o", "json"}, env);
  REQUIRE(history_json.code == 0);
  json attempts = json::parse(history_json.out);
  REQUIRE(attempts.size() == 1);
  CHECK(attempts[0].value("centerID", "") == "local");
  CHECK(attempts[0].value("outcome", "") == "succeeded");
  CHECK(attempts[0].contains("placedAt"));
  CHECK(attempts[0].contains("startedAt"));
  CHECK(attempts[0].contains("endedAt"));
  CHECK(attempts[0].value("elapsedSeconds", 0.0) >= 0.9);  // its command sleeps a second

  Ran listed = Jcctl(dir, {"job", "list", "--status", "completed"}, env);
  CHECK(listed.code == 0);
  CHECK_THAT(listed.out, Catch::Contains(job));
  CHECK_THAT(listed.out, Catch::Contains("hello"));

  Ran logs = Jcctl(dir, {"job", "logs", job, "--follow"}, env);
  INFO(logs.err);
  CHECK(logs.code == 0);
  CHECK_THAT(logs.out, Catch::Contains("hello from 0"));

  Ran explained = Jcctl(dir, {"job", "explain", job}, env);
  CHECK(explained.code == 0);
  CHECK_THAT(explained.out, Catch::Contains("-> local"));

  Ran usage = Jcctl(dir, {"center", "usage"}, env);
  CHECK(usage.code == 0);
  CHECK_THAT(usage.out, Catch::Contains("local"));

  // What the job used, as the center measured it, and this month's report (issue 31).
  Ran records;
  CHECK(jc::testing::WaitUntil([&] {
    records = Jcctl(dir, {"usage", "--job", job}, env);
    return records.code == 0 && records.out.find(job + "/0/0/0") != std::string::npos;
  }));
  CHECK_THAT(records.out, Catch::Contains("succeeded"));
  Ran csv = Jcctl(dir, {"usage", "--job", job, "-o", "csv"}, env);
  CHECK(csv.code == 0);
  CHECK_THAT(csv.out, Catch::StartsWith("RECORD,PROJECT,USER,CENTER,SPEC,OUTCOME"));
  CHECK_THAT(csv.out, Catch::Contains(job + "/0/0/0,"));
  Ran report = Jcctl(dir, {"report", "--by", "center"}, env);
  INFO(report.err);
  CHECK(report.code == 0);
  CHECK_THAT(report.out, Catch::Contains("local"));
  CHECK_THAT(report.out, Catch::Contains("TOTAL"));
  Ran bad_period = Jcctl(dir, {"report", "--from", "2026-11-20", "--to", "2026-11-10"}, env);
  CHECK(bad_period.code != 0);
  CHECK_THAT(bad_period.err, Catch::Contains("before it starts"));

  // A job that fails: watch says so with exit code 1.
  Write(dir + "/fails.json",
        R"({"name": "fails", "tasks": [{"name": "t", "command": "exit 3", "resourceSpecId": "cpu-1", "replicaNumber": 1}]})");
  Ran failing = Jcctl(dir, {"job", "submit", "-f", dir + "/fails.json"}, env);
  REQUIRE(failing.code == 0);
  std::string failed_job = failing.out.substr(4, failing.out.find(" submitted") - 4);
  Ran watch_failed = Jcctl(dir, {"job", "watch", failed_job}, env);
  INFO(watch_failed.out);
  CHECK(watch_failed.code == 1);
  // Seen ending, or (when it ended before the watch began) as the snapshot of a failed job.
  bool saw_failed = watch_failed.out.find("ended  failed") != std::string::npos ||
                    watch_failed.out.find("snapshot  failed") != std::string::npos;
  CHECK(saw_failed);

  // A submit retried with its idempotency key answers with the job it first made.
  Ran keyed = Jcctl(dir, {"job", "submit", "-q", "-f", dir + "/fails.json", "--idempotency_key", "retry-me"}, env);
  INFO(keyed.err);
  REQUIRE(keyed.code == 0);
  Ran again = Jcctl(dir, {"job", "submit", "-q", "-f", dir + "/fails.json", "--idempotency_key", "retry-me"}, env);
  CHECK(again.code == 0);
  CHECK(again.out == keyed.out);
  CHECK(keyed.out != failed_job + "\n");  // a job of its own

  // Tokens: a new one works, a revoked or made-up one is refused (exit 4).
  Ran made = Jcctl(dir, {"token", "create", "--description", "ci", "--ttl", "1h", "-o", "json"}, env);
  INFO(made.err);
  REQUIRE(made.code == 0);
  json token_doc = json::parse(made.out);
  INFO(made.out);
  CHECK(token_doc["token"].contains("expires_at"));  // --ttl 1h: a token that expires
  // A misspelt status is an error, not an empty list.
  Ran bogus = Jcctl(dir, {"job", "list", "--status", "bogus"}, env);
  CHECK(bogus.code != 0);
  CHECK_THAT(bogus.err, Catch::Contains("is not a job status"));
  CHECK(bogus.out.empty());
  std::string secret = token_doc["secret"];
  CHECK(Jcctl(dir, {"whoami", "--token", secret}, env).code == 0);
  CHECK(Jcctl(dir, {"token", "revoke", token_doc["token"]["token_id"]}, env).code == 0);
  Ran refused = Jcctl(dir, {"job", "list", "--token", secret}, env);
  CHECK(refused.code == 4);
  CHECK(Lines(refused.err) == 1);
  CHECK(Jcctl(dir, {"job", "list", "--token", "made-up"}, env).code == 4);

  // Not found, and a malformed job the server refuses.
  Ran missing = Jcctl(dir, {"job", "get", "no-such-job"}, env);
  CHECK(missing.code == 5);
  CHECK(Lines(missing.err) == 1);
  Write(dir + "/invalid.yaml", "name: x\ntasks: []\n");
  Ran invalid = Jcctl(dir, {"job", "submit", "-f", dir + "/invalid.yaml"}, env);
  CHECK(invalid.code == 2);
  CHECK(Lines(invalid.err) == 1);

  server.Signal(SIGTERM);
  server.Wait();
  std::filesystem::remove_all(dir);
}

TEST_CASE("jcctl job watch and job logs --follow carry on across a restart of the server, and end with the job, "
          "not with the connection [C8][A7]",
          "[C8][A7]") {
  std::string dir = TempDir() + "-restart";
  std::filesystem::create_directories(dir);
  int adapter_port_number = 0;
  auto adapter = jc::testing::StartLocalAdapterProcess(JC_ADAPTER_LOCAL, dir, "local", 4, &adapter_port_number);
  auto started = jc::testing::StartServerProcess(JC_SERVER_BINARY, dir, "e2e_jcctl_restart", "server.log");
  const std::string port = std::to_string(started.rest_port);
  std::string token = jc::testing::AdminToken(dir + "/admin.token");
  jc::testing::RestClient rest(started.rest_port, token);
  REQUIRE(jc::testing::AddCenterWithSpec(rest, "local", "127.0.0.1:" + std::to_string(adapter_port_number), 4, 4096,
                                         "256Mi"));
  std::vector<std::string> env{"JCCTL_SERVER=http://127.0.0.1:" + port, "JCCTL_TOKEN=" + token};
  Write(dir + "/job.yaml",
        "name: across\n"
        "tasks:\n"
        "  - name: main\n"
        "    command: echo before; sleep 4; echo after\n"
        "    resourceSpecId: cpu-1\n"
        "    replicaNumber: 1\n");
  Ran submitted = Jcctl(dir, {"job", "submit", "-f", dir + "/job.yaml", "-o", "json"}, env);
  INFO(submitted.err);
  REQUIRE(submitted.code == 0);
  const std::string job = json::parse(submitted.out)["jobId"];
  auto background = [&](std::vector<std::string> args, const std::string& out) {
    std::vector<std::string> argv{"/usr/bin/env", env[0], env[1], JC_JCCTL_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    return std::make_unique<jc::testing::Process>(argv, dir + "/" + out);
  };
  auto watch = background({"job", "watch", job}, "watch.out");
  auto logs = background({"job", "logs", job, "--follow"}, "logs.out");
  REQUIRE(jc::testing::WaitUntil([&] { return Slurp(dir + "/logs.out").find("before") != std::string::npos; }));

  // The server stops (its streams end cleanly) and comes back on the same port.
  started.process->Signal(SIGTERM);
  REQUIRE(started.process->Wait().has_value());
  auto again = jc::testing::StartServerProcess(JC_SERVER_BINARY, dir, "e2e_jcctl_restart", "server2.log",
                                               {"--rest_address=127.0.0.1:" + port});
  auto watched = watch->Wait(std::chrono::seconds(60));
  auto followed = logs->Wait(std::chrono::seconds(60));
  const std::string watch_out = Slurp(dir + "/watch.out"), logs_out = Slurp(dir + "/logs.out");
  INFO(watch_out);
  INFO(logs_out);
  REQUIRE(watched.has_value());
  CHECK(*watched == 0);
  CHECK_THAT(watch_out, Catch::Contains("resuming"));
  CHECK_THAT(watch_out, Catch::Contains("completed"));
  REQUIRE(followed.has_value());
  CHECK(*followed == 0);
  CHECK_THAT(logs_out, Catch::Contains("after"));
  // Each line once: after the restart the follower asks only for what it had not shown.
  CHECK(logs_out.find("before") == logs_out.rfind("before"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("jcctl for operators: users, project roles, projects with quotas and budgets, and centers, specs and "
          "images changed and removed, each refusal a clear exit code",
          "[C8][C6]") {
  std::string dir = TempDir();
  auto started = jc::testing::StartServerProcess(JC_SERVER_BINARY, dir, "e2e_jcctl_ops", "server.log");
  std::string token = jc::testing::AdminToken(dir + "/admin.token");
  std::vector<std::string> env{"JCCTL_SERVER=http://127.0.0.1:" + std::to_string(started.rest_port),
                               "JCCTL_TOKEN=" + token};
  auto ok = [&](std::vector<std::string> args) {
    Ran r = Jcctl(dir, args, env);
    INFO(absl::StrJoin(args, " ") << "\n" << r.out << r.err);
    CHECK(r.code == 0);
    return r;
  };

  // Projects and users, and who is what where.
  CHECK_THAT(ok({"project", "create", "alpha", "--description", "team a"}).out, Catch::Contains("alpha"));
  CHECK_THAT(ok({"user", "create", "ann", "--display_name", "Ann Li"}).out, Catch::Contains("Ann Li"));
  CHECK_THAT(ok({"member", "set", "ann", "alpha", "--role", "owner"}).out, Catch::Contains("ann is owner of alpha"));
  CHECK_THAT(ok({"user", "get", "ann"}).out, Catch::Contains("alpha:OWNER"));
  CHECK_THAT(ok({"user", "list"}).out, Catch::Contains("ann"));
  Ran bad_role = Jcctl(dir, {"member", "set", "ann", "alpha", "--role", "boss"}, env);
  CHECK(bad_role.code == 2);
  CHECK_THAT(bad_role.err, Catch::Contains("not viewer, member or owner"));
  CHECK(Jcctl(dir, {"member", "set", "ann", "no-such-project"}, env).code != 0);

  // Quotas and budgets, read back.
  CHECK_THAT(ok({"quota", "set", "alpha", "--gpus", "4", "--queued", "10", "--priority", "50"}).out,
             Catch::Contains("priority up to 50"));
  ok({"budget", "set", "alpha", "--monthly", "250", "--hard"});
  Ran project = ok({"project", "get", "alpha", "-o", "json"});
  json p = json::parse(project.out);
  CHECK(p["quota"]["max_running_gpus"] == "4");  // int64 is a string in protobuf's JSON
  CHECK(p["quota"]["max_queued_jobs"] == "10");
  CHECK(p["quota"]["max_priority"] == 50);  // int32 is a number
  CHECK_THAT(ok({"project", "get", "alpha"}).out, Catch::Contains("MAX_PRIO"));
  Ran too_high = Jcctl(dir, {"quota", "set", "alpha", "--priority", "2000000"}, env);  // the server's 400
  CHECK(too_high.code == 2);
  CHECK_THAT(too_high.err, Catch::Contains("max_priority must be 0 to 1000000"));
  CHECK(p["budget"]["monthly"] == 250);
  CHECK(p["budget"]["hard"] == true);
  Ran bad_quota = Jcctl(dir, {"quota", "set", "alpha", "--gpus", "-1"}, env);
  CHECK(bad_quota.code == 2);
  CHECK_THAT(bad_quota.err, Catch::Contains("gpus: \"-1\" is not a count"));
  CHECK(Jcctl(dir, {"budget", "set", "alpha", "--monthly", "-5"}, env).code == 2);  // the server's 400

  // A center: changed, reported alive, removed; a spec and an image likewise.
  Write(dir + "/center.yaml",
        "ai_center_id: c1\nname: first\nregion: north\nadapter_address: 127.0.0.1:1\ncapacity: {cpu: 8, memory: 8192}\n");
  ok({"center", "create", "-f", dir + "/center.yaml"});
  Write(dir + "/rename.yaml", "name: renamed\n");
  CHECK_THAT(ok({"center", "update", "c1", "-f", dir + "/rename.yaml"}).out, Catch::Contains("center c1 updated"));
  CHECK_THAT(ok({"center", "get", "c1"}).out, Catch::Contains("renamed"));
  CHECK_THAT(ok({"center", "heartbeat", "c1"}).out, Catch::Contains("reported alive"));
  // The center's adapter key, written for its adapter (issue 44, hole 5): this account's alone.
  CHECK_THAT(ok({"center", "issue-key", "c1", "--key_file", dir + "/c1.key"}).out,
             Catch::Contains("adapter key of center c1 written to"));
  CHECK(Slurp(dir + "/c1.key").rfind("jcak_", 0) == 0);
  CHECK((std::filesystem::status(dir + "/c1.key").permissions() & std::filesystem::perms::all) ==
        (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write));
  CHECK_THAT(ok({"center", "issue-key", "c1"}).out, Catch::Contains("the key it replaces works until"));
  Write(dir + "/spec.yaml",
        "resource_spec_id: s1\nresource_spec_name: one\nresource_quantity: {cpu: 1, memory: 1Gi}\nprice: 2\n"
        "service_type: batch\n"
        "computing_center_list: c1\n");
  ok({"spec", "create", "-f", dir + "/spec.yaml"});
  Write(dir + "/spec-name.yaml", "resource_spec_name: one CPU\n");
  ok({"spec", "update", "s1", "-f", dir + "/spec-name.yaml"});
  CHECK_THAT(ok({"spec", "get", "s1"}).out, Catch::Contains("one CPU"));
  CHECK_THAT(ok({"spec", "price", "s1", "c1", "3"}).out, Catch::Contains("s1 at c1 costs 3 an hour"));
  CHECK(Jcctl(dir, {"spec", "price", "s1", "c1", "cheap"}, env).code == 2);
  // Decimal prices (issue 49 item 5), kept exactly; what is not one is the server's 400.
  CHECK_THAT(ok({"spec", "price", "s1", "c1", "3.5"}).out, Catch::Contains("s1 at c1 costs 3.5 an hour"));
  CHECK_THAT(ok({"spec", "offers", "s1"}).out, Catch::Contains("3.5"));
  Ran too_fine = Jcctl(dir, {"spec", "price", "s1", "c1", "1.0000001"}, env);
  CHECK(too_fine.code == 2);
  CHECK_THAT(too_fine.err, Catch::Contains("price: \"1.0000001\" has more than six decimals"));
  // Utilisation (issue 49 item 12): c1 offers its 8 cores from its registration on.
  Ran used = ok({"utilisation", "--center", "c1", "--trend", "0"});
  CHECK_THAT(used.out, Catch::StartsWith("CENTER"));
  CHECK_THAT(used.out, Catch::Contains("CPU_OFFERED_H"));
  CHECK_THAT(used.out, Catch::Contains("c1"));
  CHECK_THAT(used.out, Catch::Contains("(so far)"));
  CHECK(Jcctl(dir, {"utilisation", "--month", "May"}, env).code == 2);
  // A price scheduled from a date, and each center's offer with it (issue 49 item 5).
  const std::string later = absl::FormatTime("%Y-%m-%d", absl::Now() + absl::Hours(24 * 30), absl::UTCTimeZone());
  CHECK_THAT(ok({"spec", "price", "s1", "c1", "4", "--from", later}).out, Catch::Contains("from " + later));
  Ran offers = ok({"spec", "offers", "s1"});
  CHECK_THAT(offers.out, Catch::StartsWith("CENTER"));
  CHECK_THAT(offers.out, Catch::Contains("4 from " + later + "T00:00:00Z"));
  CHECK(Jcctl(dir, {"spec", "price", "s1", "c1", "4", "--from", "soon"}, env).code == 2);
  Write(dir + "/image.yaml", "image_id: i1\nname: torch\nai_center_id: c1\nframework: PyTorch\n");
  ok({"image", "create", "-f", dir + "/image.yaml"});
  Write(dir + "/image-fw.yaml", "framework: JAX\n");
  ok({"image", "update", "i1", "-f", dir + "/image-fw.yaml"});
  CHECK_THAT(ok({"image", "get", "i1"}).out, Catch::Contains("JAX"));
  ok({"image", "delete", "i1"});
  CHECK(Jcctl(dir, {"image", "get", "i1"}, env).code == 5);
  ok({"spec", "delete", "s1"});
  CHECK(Jcctl(dir, {"spec", "get", "s1"}, env).code == 5);

  // Undone in order: a project with members cannot go (409: exit 1), then it can.
  CHECK(Jcctl(dir, {"project", "delete", "alpha"}, env).code == 1);
  CHECK_THAT(ok({"member", "remove", "ann", "alpha"}).out, Catch::Contains("ann is no longer in alpha"));
  ok({"user", "delete", "ann"});
  CHECK(Jcctl(dir, {"user", "get", "ann"}, env).code == 5);
  ok({"project", "delete", "alpha"});
  ok({"center", "delete", "c1"});
  // Not an admin: refused with exit 4.
  CHECK(Jcctl(dir, {"user", "list"}, {"JCCTL_SERVER=http://127.0.0.1:" + std::to_string(started.rest_port),
                                      "JCCTL_TOKEN=not-a-token"})
            .code == 4);
}
