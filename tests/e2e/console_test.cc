// The operator console (/ui) in headless Chromium (Debian's `chromium`), against the real
// `jointcloud` and a real adapter running real jobs (issue 16 item 2): each page is loaded,
// what it shows is checked in the DOM Chromium rendered, and a screenshot is saved.

#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tests/testing/rest_client.h"
#include "tests/testing/server_processes.h"

using nlohmann::json;

namespace {

// Headless Chromium (Debian's) on `url` with `mode` (--dump-dom, or --screenshot=FILE);
// returns its stdout.
std::string Chromium(const std::string& dir, const std::string& url, const std::string& mode) {
  static int n = 0;
  auto ran = jc::testing::RunCaptured(
      dir, {"chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
            "--hide-scrollbars", "--user-data-dir=" + dir + "/profile" + std::to_string(++n), "--window-size=1400,1000",
            "--virtual-time-budget=8000", mode, url});
  INFO(ran.err);
  REQUIRE(ran.code == 0);
  return ran.out;
}

}  // namespace

TEST_CASE("the operator console shows centers, the queue, jobs with placements and logs, and charts", "[C8][A12]") {
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
  auto page = [&](const std::string& hash) { return base + "#/" + hash + (hash.find('?') == std::string::npos ? "?" : "&") + "token=" + token; };

  {  // centers: a table with status and usage, and a map by geometry
    std::string dom = Chromium(dir, page("centers"), "--dump-dom");
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
    Chromium(dir, page("centers"), "--screenshot=" + shots + "/centers.png");
  }
  {  // the queue: the waiting job and why it waits
    std::string dom = Chromium(dir, page("queue"), "--dump-dom");
    CHECK_THAT(dom, Catch::Contains("Queue: 1 waiting"));
    // A job not ended has a Stop button (confirmed before it stops anything); an ended one has none.
    std::string waiting_page = Chromium(dir, page("jobs/" + waiting_id), "--dump-dom");
    CHECK_THAT(waiting_page, Catch::Contains("id=\"stop-job\""));
    CHECK_THAT(dom, Catch::Contains(waiting_id));
    CHECK_THAT(dom, Catch::Contains("too-big"));
    Chromium(dir, page("queue"), "--screenshot=" + shots + "/queue.png");
  }
  {  // jobs: every job with its status and centers
    std::string dom = Chromium(dir, page("jobs"), "--dump-dom");
    CHECK_THAT(dom, Catch::Contains("Jobs (3)"));
    for (const auto& id : done) CHECK_THAT(dom, Catch::Contains(id));
    CHECK_THAT(dom, Catch::Contains("badge completed"));
    Chromium(dir, page("jobs"), "--screenshot=" + shots + "/jobs.png");
  }
  {  // a job: replicas and centers, the placement's explanation, its events and a replica's log
    std::string dom = Chromium(dir, page("jobs/" + done[0]), "--dump-dom");
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
    Chromium(dir, page("jobs/" + done[0]), "--screenshot=" + shots + "/job.png");
  }
  {  // plan: a dry run of a job, per center its expected start, finish, cost and marks (A16)
    std::string dom = Chromium(dir, page("plan?spec=cpu-1&replicas=2&command=true&duration=90"), "--dump-dom");
    CHECK_THAT(dom, Catch::Contains("Plan a job"));
    CHECK_THAT(dom, Catch::Contains("id=\"plan-form\""));
    CHECK_THAT(dom, Catch::Contains("id=\"placement\""));
    CHECK_THAT(dom, Catch::Contains("Task 0 replica 1 → beijing"));
    CHECK_THAT(dom, Catch::Contains("beijing ✔"));
    CHECK_THAT(dom, Catch::Contains("<th>Finish</th>"));
    CHECK_THAT(dom, Catch::Contains("badge chosen"));
    CHECK_THAT(dom, Catch::Contains("id=\"expected-durations\""));  // from the estimate given: 90 s
    CHECK_THAT(dom, !Catch::Contains("undefined"));
    Chromium(dir, page("plan?spec=cpu-1&replicas=2&command=true&duration=90"), "--screenshot=" + shots + "/plan.png");
    // What the plan refuses is said, not drawn: a spec no center offers.
    std::string refused = Chromium(dir, page("plan?spec=no-such-spec"), "--dump-dom");
    CHECK_THAT(refused, Catch::Contains("id=\"plan-error\""));
    CHECK_THAT(refused, Catch::Contains("no-such-spec"));
    // A link whose values carry markup shows them as text: nothing of it becomes the page's
    // (the spec, name and command are the link's, and the refusal repeats the spec).
    std::string injected = Chromium(
        dir, page("plan?spec=%3Cimg%20src%3Dx%20id%3Dinjected%3E&name=%22%3E%3Cb%20id%3Dbold%3E&command=%3Cscript%3E"),
        "--dump-dom");
    CHECK_THAT(injected, Catch::Contains("id=\"plan-error\""));
    CHECK_THAT(injected, !Catch::Contains("id=\"injected\""));
    CHECK_THAT(injected, !Catch::Contains("id=\"bold\""));
    CHECK_THAT(injected, Catch::Contains("&lt;img src=x id=injected&gt;"));
    // The jobs are as they were: a plan submits nothing.
    CHECK(rest.Get("/openapi/v1/trainjob?pageSize=100").body["data"]["jobs"].size() == 3);
  }
  {  // charts: throughput and scheduling time from /metrics
    std::string dom = Chromium(dir, page("charts"), "--dump-dom");
    CHECK_THAT(dom, Catch::Contains("jobs scheduled"));
    CHECK_THAT(dom, Catch::Contains("mean scheduling time"));
    CHECK_THAT(dom, Catch::Contains("Throughput: jobs scheduled per second"));
    Chromium(dir, page("charts"), "--screenshot=" + shots + "/charts.png");
  }
  {  // usage: this month's cost per project and center, per day, and the settlement's status
    std::string month = absl::FormatTime("%Y-%m", absl::Now(), absl::UTCTimeZone());
    REQUIRE(jc::testing::WaitUntil([&] {
      auto r = rest.Get("/openapi/v1/accounting/records?jobId=" + done[0]);
      return r.http_status == 200 && r.body["data"].value("records", json::array()).size() == 2;
    }));
    std::string dom = Chromium(dir, page("usage"), "--dump-dom");
    CHECK_THAT(dom, Catch::Contains("Usage and cost, " + month));
    CHECK_THAT(dom, Catch::Contains("id=\"usage\""));
    CHECK_THAT(dom, Catch::Contains("beijing"));
    CHECK_THAT(dom, Catch::Contains("Cost by project"));
    CHECK_THAT(dom, Catch::Contains("Cost by day"));
    CHECK_THAT(dom, Catch::Contains("badge open"));
    Chromium(dir, page("usage"), "--screenshot=" + shots + "/usage.png");
  }
  {  // without a token: the sign-in form, and no data
    std::string dom = Chromium(dir, base + "#/centers", "--dump-dom");
    CHECK_THAT(dom, Catch::Contains("Sign in"));
    CHECK_THAT(dom, !Catch::Contains("Beijing AI"));
  }
  {  // the files are served by the gateway itself
    httplib::Client http("127.0.0.1", started.rest_port);
    auto js = http.Get("/ui/console.js");
    REQUIRE(js);
    CHECK(js->status == 200);
    CHECK_THAT(js->get_header_value("Content-Type"), Catch::StartsWith("text/javascript"));
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
