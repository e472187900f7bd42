// Notebooks for real (issue 46 Deliver 3, SPEC A17): Jupyter Notebook from Debian's packages
// in an image of its own (deploy/notebook/make-notebook-image.sh, made once into the build
// tree by the test "notebook image: …", tests/e2e/notebook-image.sh), pushed to a registry
// with TLS and credentials, pulled by digest by a nexec center's agent, and started as an
// interactive job through the native adapter on a port of the center's range. A member opens
// it from the console's Open button in Chromium, on its own origin through the endpoint
// listener, and runs a cell over the kernel's WebSocket. Jupyter takes only requests that
// carry the job's endpoint token, which the listener adds: another process on the center's
// host reaches its port and gets nothing.

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/testing/browser.h"
#include "tests/testing/nexec_center.h"
#include "tests/testing/oci_registry.h"
#include "tests/testing/server_processes.h"
#include "tests/testing/test_system.h"

using json = nlohmann::json;

namespace {

// The notebook as a job runs it: Jupyter on its port of the center's range, on loopback
// (the listener reaches it through the adapter on this host), its token from the job's
// environment (JUPYTER_TOKEN: never on its command line, which every account may read), its
// files and runtime in the container's /tmp.
constexpr char kNotebookCommand[] =
    "cd /tmp && HOME=/tmp JUPYTER_TOKEN=$JC_ENDPOINT_TOKEN exec jupyter notebook --no-browser --ip=127.0.0.1 "
    "--port=$JC_PORT_JUPYTER --NotebookApp.allow_remote_access=True --notebook-dir=/tmp";

// Runs in the notebook's tab: starts a kernel, runs a cell over the kernel's WebSocket
// (Jupyter's messaging protocol: an execute_request on the shell channel; its output comes
// as a stream on iopub, the kernel goes idle there after it, and the execute_reply comes on
// shell), and says what came back.
constexpr char kRunCell[] = R"JS(async () => {
  const started = await fetch("/api/kernels", {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ name: "python3" }) });
  if (!started.ok) return JSON.stringify({ error: "starting a kernel: " + started.status + " " + await started.text() });
  const kernel = await started.json();
  const session = "jc-notebook-test";
  const msgId = "cell-" + Date.now();
  const ran = await new Promise((resolve) => {
    const ws = new WebSocket(location.origin.replace(/^http/, "ws") + "/api/kernels/" + kernel.id +
                             "/channels?session_id=" + session);
    const timer = setTimeout(() => resolve({ error: "no answer from the kernel within 60 s" }), 60000);
    let text = "", status = "", idle = false;
    // Its output comes on iopub before the kernel goes idle there; the reply comes on shell,
    // in either order with those.
    const finish = () => {
      if (!idle || !status) return;
      clearTimeout(timer);
      ws.close();
      resolve({ text, status });
    };
    ws.onopen = () => ws.send(JSON.stringify({
      header: { msg_id: msgId, username: "alice", session, msg_type: "execute_request", version: "5.3",
                date: new Date().toISOString() },
      parent_header: {}, metadata: {}, channel: "shell", buffers: [],
      content: { code: "import os\nprint(6 * 7, os.getuid())", silent: false, store_history: true,
                 user_expressions: {}, allow_stdin: false, stop_on_error: true } }));
    ws.onmessage = (m) => {
      const msg = JSON.parse(m.data);
      if (!msg.parent_header || msg.parent_header.msg_id !== msgId) return;
      if (msg.msg_type === "stream") text += msg.content.text;
      if (msg.msg_type === "execute_reply") status = msg.content.status;
      if (msg.msg_type === "status" && msg.content.execution_state === "idle") idle = true;
      finish();
    };
    ws.onerror = () => { clearTimeout(timer); resolve({ error: "the kernel's WebSocket failed" }); };
  });
  const kernels = await (await fetch("/api/kernels")).json();
  return JSON.stringify({ ...ran, kernels: kernels.length, origin: location.origin, cookie: document.cookie });
})JS";

}  // namespace

TEST_CASE("a notebook: Jupyter in its image runs as an interactive job at a nexec center, opens from the console's "
          "Open button on its own origin, runs a cell over the kernel's WebSocket, and answers nothing that comes "
          "without the listener's token [A17][C6]",
          "[A17][C6][browser]") {
  if (geteuid() != 0) {
    WARN("not run: running images needs root (CI runs as root)");
    return;
  }
  const std::string layout = JC_NOTEBOOK_IMAGE_DIR "/layout";
  INFO("the notebook image is made by the test \"notebook image: …\" (tests/e2e/notebook-image.sh), which ctest "
       "runs first");
  REQUIRE(std::filesystem::exists(layout + "/index.json"));
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("jc-notebook-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  struct Removed {  // last, once everything that used it has stopped
    std::filesystem::path dir;
    ~Removed() { std::filesystem::remove_all(dir); }
  } removed{dir};

  // The image, in a registry as a center's would hold it, by tag; the federation resolves
  // the tag to its digest and the agent pulls that.
  auto registry = jc::testing::OciRegistry::Start((dir / "registry").string(), JC_SOURCE_DIR);
  INFO(registry.status().ToString());
  REQUIRE(registry.ok());
  auto digest = (*registry)->PushLayout(layout, "notebook", "ai/notebook", "6.4");
  INFO(digest.status().ToString());
  REQUIRE(digest.ok());

  // A nexec center whose agent runs images, behind the native adapter: a port range, a spec
  // for interactive work, replicas as the unprivileged account nobody.
  jc::testing::NexecCenter center(
      "nb", 4,
      {"--registry_auth_file=" + (*registry)->auth_file(),
       "--registry_cert_dir=" + std::filesystem::path((*registry)->ca_file()).parent_path().string()});
  REQUIRE(jc::testing::WaitUntil(
      [&] { return center.agent->Log().find("tasks with an image run in it") != std::string::npos; }));
  // The port band of this suite (below the kernel's ephemeral ports; conformance.cc lists
  // the others).
  const std::string adapter = center.StartAdapter(R"(center_id: nb
ports: {first: 32000, last: 32099}
specs:
  - {id: nb-1, cpu: 1, memory: 2Gi}
images:
  - {id: notebook, name: Jupyter Notebook}
run_as: {default: nobody}
)");

  jc::testing::TestSystem cp([&](jc::server::AppOptions& o) {
    jc::testing::FastIntervals(o);
    o.endpoint_host = "127.0.0.1";
    o.endpoint_port = 0;
    o.registries.ca_file = (*registry)->ca_file();
    o.registries.auth_file = (*registry)->auth_file();
    o.endpoints.activity_interval = absl::Seconds(1);
  });
  REQUIRE(cp.rest->Post("/openapi/v1/centers", {{"ai_center_id", "nb"}, {"name", "nb"}, {"region", "cn"},
                                                {"network_topology", "cn/nb"}, {"adapter_address", adapter},
                                                {"capacity", {{"cpu", 4}, {"memory", 8192}}}})
              .http_status == 200);
  REQUIRE(cp.rest->Post("/openapi/v1/resourcespecs", {{"resource_spec_id", "nb-1"},
                                                      {"resource_spec_name", "a notebook's"},
                                                      {"resource_quantity", {{"cpu", "1"}, {"memory", "2Gi"}}},
                                                      {"service_type", "interactive"},
                                                      {"price", 1},
                                                      {"computing_center_list", "nb"}})
              .http_status == 200);
  auto image = cp.rest->Post("/openapi/v1/images", {{"image_id", "notebook"}, {"name", "Jupyter Notebook"},
                                                    {"ai_center_id", "nb"}, {"framework", "Jupyter"},
                                                    {"reference", (*registry)->host() + "/ai/notebook:6.4"}});
  INFO(image.body.dump());
  REQUIRE(image.http_status == 200);
  auto alice = cp.UserClient("alice", "lab", "MEMBER");

  json task = {{"name", "notebook"},
               {"command", kNotebookCommand},
               {"imageId", "notebook"},
               {"resourceSpecId", "nb-1"},
               {"kind", "interactive"},
               {"ports", json::array({{{"name", "jupyter"}, {"readinessPath", "/api"}, {"activityPath", "/api/status"}}})}};
  // Culled once idle for 30 s by Jupyter's own count (its /api/status), which the test's
  // own use outlasts.
  auto created = alice->Post("/openapi/v1/trainjob", {{"name", "nb"}, {"project", "lab"}, {"idleTimeout", "30s"},
                                                      {"tasks", json::array({task})}});
  INFO(created.body.dump());
  REQUIRE(created.http_status == 200);
  const std::string id = created.body["data"]["jobId"];
  struct Stopped {  // however the test ends: Jupyter and its kernel must not outlive it
    jc::testing::TestSystem& cp;
    std::string id;
    ~Stopped() {
      cp.rest->Post("/openapi/v1/trainjob/" + id + "/stop", json::object());
      jc::testing::WaitUntil(
          [&] {
            std::string s = cp.rest->Get("/openapi/v1/trainjob/" + id).body["data"].value("status", "");
            return s == "completed" || s == "failed";
          },
          std::chrono::seconds(60));
    }
  } stopped{cp, id};

  // Pulled (about 110 MB), unpacked, started: ready once Jupyter answers on its port.
  json job;
  bool ready = jc::testing::WaitUntil(
      [&] {
        job = cp.rest->Get("/openapi/v1/trainjob/" + id).body["data"];
        return job["taskInfos"][0].value("readyReplicas", 0) == 1 || job.value("status", "") == "failed";
      },
      std::chrono::seconds(180));
  INFO(job.dump());
  INFO(center.agent->Log().substr(center.agent->Log().size() > 4000 ? center.agent->Log().size() - 4000 : 0));
  REQUIRE(ready);
  REQUIRE(job["status"] == "running");
  // It runs in its image, by the digest the tag named: the agent pulled exactly that.
  CHECK(std::filesystem::exists(center.dir / "agent-state" / "images" / digest->substr(7) / "ready"));
  REQUIRE(job["taskInfos"][0]["endpoints"].size() == 1);
  const int port = job["taskInfos"][0]["endpoints"][0]["port"];
  CHECK(port >= 32000);
  CHECK(port <= 32099);

  // As another process on the center's host: Jupyter's port is reachable, and without the
  // job's token it runs nothing, lists nothing.
  {
    const std::string base = "http://127.0.0.1:" + std::to_string(port);
    for (const auto& [method, path] : {std::pair<std::string, std::string>{"GET", "/api/kernels"},
                                       {"POST", "/api/kernels"},
                                       {"GET", "/api/contents"}}) {
      auto direct = jc::testing::RunCaptured(
          dir, {"curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", method, base + path});
      INFO(method << " " << path << ": " << direct.out << direct.err);
      CHECK(direct.out == "403");
    }
  }

  // A member in the console: the job's page, Open, and in the tab the notebook's tree; there
  // a cell runs over the kernel's WebSocket.
  auto token = cp.rest->Post("/openapi/v1/tokens", {{"user_name", "alice"}});
  REQUIRE(token.http_status == 200);
  jc::testing::BrowserStep open_it;
  open_it.hash = "#/jobs/" + id;
  open_it.until = {"Endpoints", "class=\"open-endpoint\""};
  open_it.click = "button.open-endpoint";
  open_it.popup_until = {"Files", "Running", "notebook_list"};
  open_it.popup_eval = kRunCell;
  const std::string console = "http://127.0.0.1:" + std::to_string(cp.app->rest_port()) + "/ui/";
  const std::string browser_dir = (dir / "browser").string();
  std::filesystem::create_directories(browser_dir);
  jc::testing::BrowserRun run = jc::testing::Browse(JC_SOURCE_DIR, JC_BROWSER_TOOLS, browser_dir, console,
                                                    token.body["data"]["secret"], {open_it});
  REQUIRE(run.signed_in);
  REQUIRE(run.pages.size() == 1);
  INFO(run.pages[0].dom.substr(0, 3000));
  REQUIRE(run.pages[0].reached);
  const auto& tab = run.pages[0].popup;
  INFO(tab.address << "\n" << tab.dom.substr(0, 3000));
  REQUIRE(tab.opened);
  REQUIRE(tab.reached);
  const std::string origin = absl::StrCat("http://", id, "-0-0-jupyter.endpoints.localhost:", cp.app->endpoint_port());
  CHECK(absl::StartsWith(tab.address, origin + "/"));
  INFO(tab.eval);
  json cell = json::parse(tab.eval);
  CHECK_FALSE(cell.contains("error"));
  CHECK(cell["status"] == "ok");
  CHECK(cell["text"] == "42 65534\n");  // 6 * 7, as nobody (the center's run_as)
  CHECK(cell["kernels"] == 1);
  CHECK(cell["origin"] == origin);
  CHECK(cell["cookie"].get<std::string>().find("jc_endpoint") == std::string::npos);  // HttpOnly

  // A shell beside Jupyter: `jcctl job exec` through the listener, the tunnel, the native
  // adapter and nexec to the notebook's container (runc exec): its files and account, the
  // kernel Jupyter started, and the command's own exit status.
  {
    const std::vector<std::string> env{"JCCTL_SERVER=http://127.0.0.1:" + std::to_string(cp.app->rest_port()),
                                       "JCCTL_TOKEN=" + token.body["data"]["secret"].get<std::string>()};
    auto shell = jc::testing::RunCaptured(
        dir, {JC_JCCTL_BINARY, "job", "exec", id, "--", "sh", "-c",
              "id -u; python3 -c 'import notebook; print(\"jupyter\")'; "
              "grep -qs 'ipykerne[l]_launcher' /proc/[0-9]*/cmdline && echo kernel-running; exit 5"},
        env);
    INFO(shell.out << shell.err);
    CHECK(shell.code == 5);
    CHECK(shell.out == "65534\njupyter\nkernel-running\n");
  }

  // Left alone, the notebook is idle by Jupyter's own count (/api/status: its last_activity
  // stays at the cell's run), and is stopped 30 s after, completed, saying why.
  json ended;
  bool culled = jc::testing::WaitUntil(
      [&] {
        ended = cp.rest->Get("/openapi/v1/trainjob/" + id).body["data"];
        return ended.value("status", "") == "completed" || ended.value("status", "") == "failed";
      },
      std::chrono::seconds(120));
  INFO(ended.dump());
  REQUIRE(culled);
  CHECK(ended["status"] == "completed");
  CHECK(absl::StartsWith(ended.value("statusReason", ""), "stopped: idle for 30 s"));
}
