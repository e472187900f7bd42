#include "tools/jcctl/commands.h"
#include "tools/jcctl/command_kit.h"

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/version.h"

namespace jc::jcctl {

using nlohmann::json;

// ---- Shared pieces (command_kit.h) ----

std::string Escape(const std::string& text) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char ch : text) {
    if (std::isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~') {
      out += static_cast<char>(ch);
    } else {
      out += '%';
      out += kHex[ch >> 4];
      out += kHex[ch & 15];
    }
  }
  return out;
}

namespace {

json FromYaml(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      json out = json::object();
      for (const auto& kv : node) out[kv.first.as<std::string>()] = FromYaml(kv.second);
      return out;
    }
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (const auto& item : node) out.push_back(FromYaml(item));
      return out;
    }
    case YAML::NodeType::Scalar: {
      const std::string& text = node.Scalar();
      if (node.Tag() == "!") return text;  // quoted: a string whatever it looks like
      int64_t i = 0;
      double d = 0;
      if (absl::SimpleAtoi(text, &i)) return i;
      if (absl::SimpleAtod(text, &d) && text.find_first_of("0123456789") != std::string::npos) return d;
      if (text == "true") return true;
      if (text == "false") return false;
      if (text == "null" || text == "~") return nullptr;
      return text;
    }
    default: return nullptr;
  }
}

}  // namespace

absl::StatusOr<json> ListAll(Client* client, const std::string& path, const std::string& key, bool camel,
                             size_t limit) {
  json items = json::array();
  std::string token;
  const char* token_param = camel ? "pageToken" : "page_token";
  const char* size_param = camel ? "pageSize" : "page_size";
  const char* next_key = camel ? "nextPageToken" : "next_page_token";
  do {
    std::string sep = path.find('?') == std::string::npos ? "?" : "&";
    std::string url = absl::StrCat(path, sep, size_param, "=1000");
    if (!token.empty()) absl::StrAppend(&url, "&", token_param, "=", Escape(token));
    auto page = client->Call("GET", url);
    if (!page.ok()) return page.status();
    if (page->contains(key)) {
      for (auto& item : (*page)[key]) {
        if (items.size() >= limit) return items;
        items.push_back(item);
      }
    }
    token = page->value(next_key, "");
  } while (!token.empty());
  return items;
}

int Show(Context& ctx, const json& value, const std::vector<Column>& columns,
         const std::function<json(const json&)>& rows_of) {
  ctx.out() << Render(value, ctx.format(), columns, rows_of);
  return 0;
}

// `run` with the client connected; a failure to connect is the command's answer.
Run WithClient(std::function<int(Context&, Client*, const Invocation&)> run) {
  return [run](Context& ctx, const Invocation& inv) {
    auto client = ctx.client();
    if (!client.ok()) return ctx.Fail(client.status());
    return run(ctx, *client, inv);
  };
}

// A list command: GET `path`, every page, as a table of `columns`.
Run ListCommand(std::string path, std::string key, bool camel, std::vector<Column> columns,
                std::function<std::string(const Invocation&)> query) {
  return WithClient([=](Context& ctx, Client* client, const Invocation& inv) {
    std::string url = path + (query ? query(inv) : "");
    size_t limit = 100000;
    if (inv.Has("limit") && !absl::SimpleAtoi(inv.Get("limit"), &limit)) {
      return ctx.Fail(absl::InvalidArgumentError(absl::StrCat("limit: \"", inv.Get("limit"), "\" is not a number")));
    }
    auto items = ListAll(client, url, key, camel, limit);
    if (!items.ok()) return ctx.Fail(items.status());
    return Show(ctx, json{{key, *items}}, columns, [key](const json& v) { return v[key]; });
  });
}

// A create command: POST the file's document to `path`.
Run CreateCommand(std::string path, std::vector<Column> columns) {
  return WithClient([=](Context& ctx, Client* client, const Invocation& inv) {
    auto doc = ReadDocument(inv.Get("file"));
    if (!doc.ok()) return ctx.Fail(doc.status());
    auto made = client->Call("POST", path, &*doc);
    if (!made.ok()) return ctx.Fail(made.status());
    return Show(ctx, *made, columns);
  });
}

// A get command: GET `prefix`/ID.
Run GetCommand(std::string prefix, std::vector<Column> columns, std::function<std::string(const Invocation&)> query) {
  return WithClient([=](Context& ctx, Client* client, const Invocation& inv) {
    auto item = client->Call("GET", prefix + "/" + Escape(inv.args[0]) + (query ? query(inv) : ""));
    if (!item.ok()) return ctx.Fail(item.status());
    return Show(ctx, *item, columns);
  });
}

std::string Query(const Invocation& inv, const std::vector<std::pair<std::string, std::string>>& flag_to_param) {
  std::string out;
  for (const auto& [flag, param] : flag_to_param) {
    if (inv.Has(flag)) absl::StrAppend(&out, out.empty() ? "?" : "&", param, "=", Escape(inv.Get(flag)));
  }
  return out;
}

// Where in the job file a refusal's field is (defined below).
absl::Status WithFileLine(const absl::Status& status, const std::string& path);

namespace {

// ---- Columns ----

std::vector<Column> CenterColumns() {
  return {Field("CENTER", "ai_center_id"),
          Field("NAME", "name"),
          Field("REGION", "region"),
          {"STATUS",
           [](const json& c) {
             if (!c.contains("status")) return std::string("unknown");
             int s = c["status"].get<int>();
             return std::string(s == 1 ? "available" : s == 0 ? "unavailable" : "unknown");
           }},
          Field("CPU", "capacity.cpu"),
          Field("GPU", "capacity.gpu"),
          Field("MEMORY_MB", "capacity.memory"),
          Field("GRADE", "security_grade"),
          Field("ADAPTER", "adapter_address")};
}

std::set<std::string> CentersOf(const json& job) {
  std::set<std::string> out;
  for (const auto& task : job.value("taskInfos", json::array())) {
    for (const auto& c : task.value("centerIDs", json::array())) {
      if (c.is_string() && !c.get<std::string>().empty()) out.insert(c.get<std::string>());
    }
  }
  return out;
}

std::vector<Column> JobColumns() {
  return {Field("JOB", "jobId"),
          Field("NAME", "name"),
          Field("STATUS", "status"),
          Field("PROJECT", "project"),
          Field("USER", "userName"),
          {"CENTERS",
           [](const json& j) {
             auto centers = CentersOf(j);
             return centers.empty() ? std::string("-") : absl::StrJoin(centers, ",");
           }},
          Field("CREATED", "createdAt"),
          {"COST", [](const json& j) { return absl::StrFormat("%.2f", j.value("cost", json::object()).value("total", 0.0)); }},
          Field("REASON", "statusReason")};
}

// TrainJob.cost in words: "12.50 (ended 10.00, 2.50 so far of 1 running attempt)".
std::string CostLine(const json& cost) {
  const double total = cost.value("total", 0.0), ended = cost.value("ended", 0.0), running = cost.value("running", 0.0);
  const int attempts = cost.value("runningAttempts", 0);
  std::string line = absl::StrFormat("%.2f", total);
  if (attempts > 0) {
    absl::StrAppend(&line, absl::StrFormat(" (ended %.2f, %.2f so far of %d running attempt%s)", ended, running, attempts,
                                           attempts == 1 ? "" : "s"));
  }
  if (cost.value("partial", false)) absl::StrAppend(&line, "; attempts metered before costs were kept: jcctl usage --job");
  return line;
}

std::string Describe(const json& job) {
  std::ostringstream out;
  auto line = [&](const std::string& key, const std::string& value) {
    if (!value.empty()) out << key << std::string(key.size() < 16 ? 16 - key.size() : 1, ' ') << value << "\n";
  };
  line("Job:", job.value("jobId", ""));
  line("Name:", job.value("name", ""));
  line("Status:", job.value("status", ""));
  line("Reason:", job.value("statusReason", ""));
  if (const json tasks = job.value("taskInfos", json::array()); !tasks.empty()) {
    line("Kind:", tasks[0].value("kind", ""));  // batch, interactive, service, streaming (SPEC A17)
  }
  line("Queue:", job.value("queuePosition", ""));
  line("Project:", job.value("project", ""));
  line("User:", job.value("userName", ""));
  line("Created:", job.value("createdAt", ""));
  line("Updated:", job.value("updatedAt", ""));
  line("Time limit:", job.value("timeLimit", ""));
  line("Idle timeout:", job.value("idleTimeout", ""));
  line("Estimated:", job.value("estimatedDuration", ""));
  line("Expected:", job.value("expectedDuration", json::object()).value("basis", ""));
  line("Cost:", CostLine(job.value("cost", json::object())));
  out << "Replicas:\n";
  json rows = json::array();
  int t = 0;
  for (const auto& task : job.value("taskInfos", json::array())) {
    auto centers = task.value("centerIDs", json::array());
    auto status = task.value("replicaStatus", json::array());
    auto messages = task.value("replicaMessages", json::array());
    for (size_t r = 0; r < status.size(); ++r) {
      rows.push_back({{"task", absl::StrCat(t, " (", task.value("name", ""), ")")},
                      {"replica", r},
                      {"status", status[r]},
                      {"center", r < centers.size() ? centers[r] : json("")},
                      {"spec", task.value("resourceSpecId", "")},
                      {"message", r < messages.size() ? messages[r] : json("")}});
    }
    ++t;
  }
  std::string table = Table(rows, {Field("TASK", "task"), Field("REPLICA", "replica"), Field("STATUS", "status"),
                                   Field("CENTER", "center"), Field("SPEC", "spec"), Field("MESSAGE", "message")});
  for (absl::string_view l : absl::StrSplit(table, '\n', absl::SkipEmpty())) out << "  " << l << "\n";
  // Named ports of running replicas, and how many are ready (SPEC A17).
  json ports = json::array();
  t = 0;
  for (const auto& task : job.value("taskInfos", json::array())) {
    for (const auto& e : task.value("endpoints", json::array())) {
      ports.push_back({{"task", t},
                       {"replica", e.value("replicaIndex", 0)},
                       {"name", e.value("name", "")},
                       {"port", e.value("port", 0)},
                       {"ready", e.value("ready", false) ? "yes" : "no"}});
    }
    if (!task.value("endpoints", json::array()).empty()) {
      line("Ready:", absl::StrCat("task ", t, ": ", task.value("readyReplicas", 0), " of ",
                                  task.value("replicaNumber", 0), " replicas"));
    }
    ++t;
  }
  if (!ports.empty()) {
    out << "Endpoints:\n";
    std::string endpoints = Table(ports, {Field("TASK", "task"), Field("REPLICA", "replica"), Field("PORT NAME", "name"),
                                          Field("PORT", "port"), Field("READY", "ready")});
    for (absl::string_view l : absl::StrSplit(endpoints, '\n', absl::SkipEmpty())) out << "  " << l << "\n";
  }
  return out.str();
}

// A duration in seconds as people read it: 45s, 3m05s, 2h01m, 3d04h.
std::string Elapsed(double seconds) {
  const int64_t s = static_cast<int64_t>(seconds + 0.5);
  if (s < 60) return absl::StrCat(s, "s");
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  if (s < 86400) return absl::StrFormat("%dh%02dm", s / 3600, (s % 3600) / 60);
  return absl::StrFormat("%dd%02dh", s / 86400, (s % 86400) / 3600);
}

// Every attempt of every replica of a job (like sacct or bhist): where it ran, when, how
// long, and how it ended. A field protobuf leaves out (0, "") is shown as such.
std::vector<Column> HistoryColumns() {
  auto number = [](const char* key) {
    return [key](const json& a) { return std::to_string(a.value(key, 0)); };
  };
  auto text = [](const char* key) {
    return [key](const json& a) {
      std::string v = a.value(key, "");
      return v.empty() ? std::string("-") : v;
    };
  };
  // RFC 3339 to the second, as sacct prints times: "2026-11-26T15:00:23Z".
  auto instant = [](const char* key) {
    return [key](const json& a) {
      std::string v = a.value(key, "");
      if (v.empty()) return std::string("-");
      if (size_t dot = v.find('.'); dot != std::string::npos) v = v.substr(0, dot) + "Z";
      return v;
    };
  };
  return {{"TASK", number("taskIndex")},
          {"REPLICA", number("replicaIndex")},
          {"ATTEMPT", number("attempt")},
          {"CENTER", text("centerID")},
          {"PLACED", instant("placedAt")},
          {"STARTED", instant("startedAt")},
          {"ENDED", instant("endedAt")},
          {"ELAPSED",
           [](const json& a) { return a.contains("startedAt") ? Elapsed(a.value("elapsedSeconds", 0.0)) : "-"; }},
          {"OUTCOME", [](const json& a) {
             std::string v = a.value("outcome", "");
             return v.empty() ? std::string(a.contains("startedAt") ? "running" : "placed") : v;
           }},
          {"EXIT", number("exitCode")},
          {"MESSAGE", text("message")}};
}

// A placement (plan or explain): the chosen center of each replica, then every center's
// verdict (filtered out and why, or its scores, weights and total).
std::string DescribePlacement(const json& p) {
  std::ostringstream out;
  bool placed = p.value("placed", false);
  out << (placed ? "Placed" : "Not placed");
  if (!p.value("reason", "").empty()) out << ": " << p.value("reason", "");
  if (!p.value("decidedAt", "").empty()) out << " (decided " << p.value("decidedAt", "") << ")";
  out << "\n";
  if (p.value("fromHistory", false)) {
    out << "As kept in the store (the best scored and the first filtered centers of each replica";
    if (p.value("replicasLeftOut", 0) > 0) out << "; " << p.value("replicasLeftOut", 0) << " replicas not kept";
    out << ")\n";
  }
  // How long it is expected to run, and from what (SPEC A16): what placement used.
  for (const auto& line : p.value("expectedDurations", json::array())) {
    out << "Expected run time, " << line.get<std::string>() << "\n";
  }
  for (const auto& r : p.value("replicas", json::array())) {
    out << "\nTask " << r.value("taskIndex", 0) << " replica " << r.value("replicaIndex", 0) << " -> "
        << (r.value("centerId", "").empty() ? "nowhere" : r.value("centerId", "")) << "\n";
    json rows = json::array();
    for (const auto& c : r.value("centers", json::array())) {
      std::string scores;
      const json all_scores = c.value("scores", json::object());  // kept: items() refers to it
      const json weights = c.value("weights", json::object());
      for (const auto& [alg, score] : all_scores.items()) {
        double w = weights.value(alg, 0.0);
        absl::StrAppend(&scores, scores.empty() ? "" : " ", alg, "=", score.dump(), "x", w);
      }
      bool feasible = c.value("feasible", false);
      // The trade-off (SPEC A16): when it would start and end there, what it would cost,
      // and which of the fastest, the cheapest, the Pareto front and the pick it is.
      auto span = [](double s) {
        if (s < 1) return std::string("now");
        if (s < 90) return absl::StrFormat("%.0f s", s);
        if (s < 90 * 60) return absl::StrFormat("%.0f min", s / 60);
        return absl::StrFormat("%.1f h", s / 3600);
      };
      std::string marks;
      for (const auto& m : c.value("marks", json::array())) absl::StrAppend(&marks, marks.empty() ? "" : ",", m.get<std::string>());
      rows.push_back({{"center", c.value("centerId", "")},
                      {"feasible", feasible},
                      {"total", feasible ? absl::StrFormat("%.2f", c.value("total", 0.0)) : std::string("-")},
                      {"start", feasible ? span(c.value("expectedStartSeconds", 0.0)) : std::string("-")},
                      {"finish", feasible ? span(c.value("expectedFinishSeconds", 0.0)) : std::string("-")},
                      {"cost", feasible ? absl::StrFormat("%.2f", c.value("expectedCost", 0.0)) : std::string("-")},
                      {"marks", marks},
                      {"why", feasible ? scores : absl::StrCat(c.value("filteredBy", ""), ": ", c.value("reason", ""))}});
    }
    std::string table = Table(rows, {Field("CENTER", "center"), Field("FEASIBLE", "feasible"), Field("TOTAL", "total"),
                                     Field("START", "start"), Field("FINISH", "finish"), Field("COST", "cost"),
                                     Field("MARKS", "marks"), Field("SCORES (score x weight) / FILTERED", "why")});
    for (absl::string_view l : absl::StrSplit(table, '\n', absl::SkipEmpty())) out << "  " << l << "\n";
    if (r.value("centersLeftOut", 0) > 0) out << "  (" << r.value("centersLeftOut", 0) << " more centers not kept)\n";
  }
  return out.str();
}

// ---- Jobs ----

// --project for a job file: the file's own `project`, when it names one, must agree.
absl::Status WithProject(const Invocation& inv, json& doc) {
  if (!inv.Has("project")) return absl::OkStatus();
  const std::string project = inv.Get("project");
  if (project.empty()) return absl::InvalidArgumentError("--project is empty");
  if (doc.is_object() && doc.contains("project") && doc["project"].is_string() &&
      !doc["project"].get<std::string>().empty() && doc["project"].get<std::string>() != project) {
    return absl::InvalidArgumentError(absl::StrCat("the file names project \"", doc["project"].get<std::string>(),
                                                   "\" and --project says \"", project, "\": leave one out"));
  }
  if (doc.is_object()) doc["project"] = project;
  return absl::OkStatus();
}

int SubmitJob(Context& ctx, Client* client, const Invocation& inv) {
  auto doc = ReadDocument(inv.Get("file"));
  if (!doc.ok()) return ctx.Fail(doc.status());
  if (absl::Status s = WithProject(inv, *doc); !s.ok()) return ctx.Fail(s);
  std::vector<std::pair<std::string, std::string>> headers;
  if (inv.Has("idempotency_key")) headers.emplace_back("Idempotency-Key", inv.Get("idempotency_key"));
  auto created = client->Call("POST", "/openapi/v1/trainjob", &*doc, headers);
  if (!created.ok()) return ctx.Fail(WithFileLine(created.status(), inv.Get("file")));
  if (inv.Has("quiet")) {
    ctx.out() << created->value("jobId", "") << "\n";  // for job=$(jcctl job submit -q ...)
    return 0;
  }
  if (ctx.format() != Format::kTable) return Show(ctx, *created, {});
  ctx.out() << "job " << created->value("jobId", "") << " submitted\n";
  return 0;
}

std::string EventLine(const std::string& type, const json& e) {
  std::string at = e.value("at", "");
  std::string text = absl::StrCat(at.empty() ? "-" : at, "  ", e.value("jobId", ""), "  ", type, "  ",
                                  e.value("status", ""));
  if (!e.value("previousStatus", "").empty() && e.value("previousStatus", "") != e.value("status", "")) {
    absl::StrAppend(&text, " (was ", e.value("previousStatus", ""), ")");
  }
  for (const auto& r : e.value("replicas", json::array())) {
    absl::StrAppend(&text, "  [", r.value("taskIndex", 0), "/", r.value("replicaIndex", 0), " ",
                    r.value("phase", "waiting"));
    if (!r.value("centerID", "").empty()) absl::StrAppend(&text, " @", r.value("centerID", ""));
    if (r.value("exitCode", 0) != 0) absl::StrAppend(&text, " exit ", r.value("exitCode", 0));
    absl::StrAppend(&text, "]");
  }
  if (!e.value("statusReason", "").empty()) absl::StrAppend(&text, "  ", e.value("statusReason", ""));
  return text;
}

// Follows the job's (or every job's) events; reconnects after a drop from the last event
// it printed, so a server restart loses nothing. Exit 0 when the job completed, 1 when it
// failed; the feed of every job runs until interrupted.
int WatchJobs(Context& ctx, Client* client, const Invocation& inv) {
  std::string job = inv.args.empty() ? "" : inv.args[0];
  // One job's story from its creation (history=true), then what happens; a resume after a
  // drop carries on from the last event printed (Last-Event-ID).
  std::string path =
      job.empty() ? "/openapi/v1/trainjobs/events" : "/openapi/v1/trainjob/" + Escape(job) + "/events?history=true";
  std::string cursor = inv.Get("since");
  std::string last_status;
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (true) {
    bool got_any = false;
    absl::Status s = client->Stream(path, cursor, [&](const std::string& id, const std::string& type, const json& e) {
      got_any = true;
      if (!id.empty()) cursor = id;
      if (ctx.format() == Format::kJson) {
        ctx.out() << e.dump() << std::endl;
      } else if (ctx.format() == Format::kYaml) {
        ctx.out() << "---\n" << Yaml(e) << std::flush;
      } else {
        ctx.out() << Printable(EventLine(type, e), /*keep_line_breaks=*/false) << std::endl;
      }
      last_status = e.value("status", "");
      return true;
    });
    // The server ends a job's stream after the job's last event. A stream that ends before
    // that (a server stopping ends every stream cleanly) is resumed like a dropped one: the
    // job's end is its status, not the end of a connection.
    const bool ended = !job.empty() && (last_status == "completed" || last_status == "failed");
    if (s.ok() && ended) break;
    if (s.ok()) s = absl::UnavailableError("the server closed the event stream");
    // A dropped connection (a server restarting) is resumed from the cursor; anything the
    // server refused is the answer.
    if (!absl::IsUnavailable(s)) return ctx.Fail(s);
    if (got_any) give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    if (std::chrono::steady_clock::now() > give_up) return ctx.Fail(s);
    ctx.err() << "jcctl: " << s.message() << "; resuming" << (cursor.empty() ? "" : " after event " + cursor) << "\n";
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  if (job.empty()) return 0;
  return last_status == "failed" ? 1 : 0;
}

int JobLogs(Context& ctx, Client* client, const Invocation& inv) {
  int task = 0, replica = 0;
  if (!absl::SimpleAtoi(inv.Get("task", "0"), &task) || task < 0) {
    return ctx.Fail(absl::InvalidArgumentError(absl::StrCat("task: \"", inv.Get("task"), "\" is not an index")));
  }
  if (!absl::SimpleAtoi(inv.Get("replica", "0"), &replica) || replica < 0) {
    return ctx.Fail(absl::InvalidArgumentError(absl::StrCat("replica: \"", inv.Get("replica"), "\" is not an index")));
  }
  std::string job = Escape(inv.args[0]);
  std::string path = absl::StrCat("/openapi/v1/trainjob/", job, "/task/", task, "/replica/", replica, "/log/content");
  const bool follow = inv.Has("follow");
  size_t shown = 0;
  // Following, a server out of reach (restarting) is waited for, up to a minute at a time.
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  auto wait_for_server = [&](const absl::Status& s) {
    if (!follow || !absl::IsUnavailable(s) || std::chrono::steady_clock::now() > give_up) return false;
    ctx.err() << "jcctl: " << s.message() << "; retrying\n";
    std::this_thread::sleep_for(std::chrono::seconds(1));
    return true;
  };
  while (true) {
    // Whether it ended is read before the log, so the last read has everything.
    bool ended = true;
    if (follow) {
      auto got = client->Call("GET", "/openapi/v1/trainjob/" + job);
      if (!got.ok()) {
        if (wait_for_server(got.status())) continue;
        return ctx.Fail(got.status());
      }
      std::string status = got->value("status", "");
      ended = status == "completed" || status == "failed";
    }
    // Only what was not shown yet comes back.
    auto text = client->Text(shown > 0 ? absl::StrCat(path, "?offset=", shown) : path);
    if (!text.ok() && wait_for_server(text.status())) continue;
    if (!text.ok() && !(follow && absl::IsFailedPrecondition(text.status()))) return ctx.Fail(text.status());
    give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    if (text.ok() && !text->empty()) {
      ctx.out() << *text << std::flush;
      shown += text->size();
    }
    if (ended) return 0;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

// ---- Tokens ----

int CreateToken(Context& ctx, Client* client, const Invocation& inv) {
  json body = json::object();
  // Checked before anything is asked of the server.
  if (inv.Has("ttl")) {
    // Seconds (3600) or a duration as Go and Slurm users write them (1h, 90m, 30d).
    int64_t ttl = 0;
    absl::Duration d;
    std::string text = inv.Get("ttl");
    if (absl::EndsWith(text, "d") && absl::SimpleAtoi(text.substr(0, text.size() - 1), &ttl)) {
      ttl *= 86400;
    } else if (!absl::SimpleAtoi(text, &ttl)) {
      if (!absl::ParseDuration(text, &d) || d < absl::ZeroDuration()) {
        return ctx.Fail(absl::InvalidArgumentError(
            absl::StrCat("--ttl: \"", text, "\" is neither seconds nor a duration (90s, 30m, 12h, 7d)")));
      }
      ttl = absl::ToInt64Seconds(d);
    }
    if (ttl < 0) return ctx.Fail(absl::InvalidArgumentError(absl::StrCat("--ttl: \"", text, "\" is negative")));
    body["ttl_seconds"] = ttl;
  }
  if (inv.Has("user")) {
    body["user_name"] = inv.Get("user");
  } else {
    auto me = client->Call("GET", "/openapi/v1/whoami");  // a token of one's own
    if (!me.ok()) return ctx.Fail(me.status());
    body["user_name"] = me->value("name", "");
  }
  if (inv.Has("description")) body["description"] = inv.Get("description");
  auto made = client->Call("POST", "/openapi/v1/tokens", &body);
  if (!made.ok()) return ctx.Fail(made.status());
  if (ctx.format() != Format::kTable) return Show(ctx, *made, {});
  ctx.out() << "token " << (*made)["token"].value("token_id", "") << " created for "
            << (*made)["token"].value("user_name", "") << "\nsecret (shown only now): " << made->value("secret", "")
            << "\n";
  return 0;
}

// A number of the answer (proto JSON writes 64-bit integers as strings) with `digits`
// decimals; "-" when absent.
Column Number(const std::string& header, const std::string& path, int digits, double scale = 1) {
  Column field = Field(header, path);
  return {header, [field, digits, scale](const json& row) {
            std::string text = field.cell(row);
            double v = 0;
            if (text == "-") return digits == 0 ? std::string("0") : absl::StrFormat("%.*f", digits, 0.0);
            if (!text.empty() && text.front() == '"') text = text.substr(1, text.size() - 2);
            if (!absl::SimpleAtod(text, &v)) return text;
            return absl::StrFormat("%.*f", digits, v / scale);
          }};
}

std::vector<Column> UsageRecordColumns() {
  return {Field("RECORD", "recordId"),     Field("PROJECT", "project"),
          Field("USER", "userName"),       Field("CENTER", "aiCenterId"),
          Field("SPEC", "resourceSpecId"), Field("OUTCOME", "outcome"),
          Field("STARTED", "startedAt"),   Number("WALL_S", "wallSeconds", 1),
          Number("CPU_S", "cpuSeconds", 1), Number("GPU_S", "gpuSeconds", 1),
          Number("MEM_MB", "memoryPeakMb", 0), Number("PRICE/H", "pricePerHour", 2),
          Number("COST", "cost", 4)};
}

std::vector<Column> ReportColumns() {
  return {Field("PERIOD", "period"),          Field("PROJECT", "project"),
          Field("USER", "userName"),          Field("CENTER", "aiCenterId"),
          Field("SPEC", "resourceSpecId"),    Number("ATTEMPTS", "totals.records", 0),
          Number("WALL_H", "totals.wallSeconds", 2, 3600), Number("CPU_H", "totals.cpuSeconds", 2, 3600),
          Number("GPU_H", "totals.gpuSeconds", 2, 3600),   Number("ENERGY_KWH", "totals.energyKwh", 3),
          Number("COST", "totals.cost", 2)};
}

// A statement: its lines by center and project, each center's total and the whole.
int ShowStatement(Context& ctx, const json& statement) {
  std::vector<Column> columns = {Field("CENTER", "aiCenterId"),          Field("PROJECT", "project"),
                                 Number("ATTEMPTS", "totals.records", 0), Number("GPU_H", "totals.gpuSeconds", 2, 3600),
                                 Number("WALL_H", "totals.wallSeconds", 2, 3600), Number("ENERGY_KWH", "totals.energyKwh", 3),
                                 Number("COST", "totals.cost", 2)};
  if (ctx.format() != Format::kTable) {
    return Show(ctx, statement, columns, [](const json& v) { return v.value("lines", json::array()); });
  }
  ctx.out() << "settlement " << statement.value("firstMonth", "") << " .. " << statement.value("month", "") << ": "
            << statement.value("status", "") << "\n";
  if (statement.value("status", "") == "closed") {
    ctx.out() << "closed " << statement.value("closedAt", "") << " by " << statement.value("closedBy", "")
              << ", digest " << statement.value("digest", "") << "\n";
  }
  json rows = statement.value("lines", json::array());
  for (json t : statement.value("centerTotals", json::array())) {
    t["project"] = "(center total)";
    rows.push_back(t);
  }
  rows.push_back({{"aiCenterId", "TOTAL"}, {"totals", statement.value("total", json::object())}});
  ctx.out() << Table(rows, columns);
  return 0;
}

int UsageReport(Context& ctx, Client* client, const Invocation& inv) {
  Invocation q = inv;
  if (!q.Has("month") && !q.Has("from") && !q.Has("to")) {
    q.flags["month"] = absl::FormatTime("%Y-%m", absl::Now(), absl::UTCTimeZone());
  }
  if (!q.Has("by")) q.flags["by"] = "project,center";
  auto got = client->Call("GET", "/openapi/v1/accounting/report" +
                                     Query(q, {{"month", "month"}, {"from", "from"}, {"to", "to"}, {"by", "groupBy"},
                                               {"granularity", "granularity"}, {"project", "project"},
                                               {"center", "center"}, {"user", "userName"}}));
  if (!got.ok()) return ctx.Fail(got.status());
  if (ctx.format() != Format::kTable) {
    return Show(ctx, *got, ReportColumns(), [](const json& v) { return v.value("rows", json::array()); });
  }
  json rows = got->value("rows", json::array());
  json total = {{"period", "TOTAL"}, {"totals", got->value("total", json::object())}};
  rows.push_back(total);
  ctx.out() << Table(rows, ReportColumns());
  return 0;
}

}  // namespace

std::vector<FlagSpec> ListFlags(std::vector<FlagSpec> more) {
  more.push_back({"limit", 0, true, "at most this many items"});
  return more;
}

absl::StatusOr<Client*> Context::client() {
  if (client_ == nullptr) {
    auto made = Client::Connect(server_);
    if (!made.ok()) return made.status();
    client_ = std::move(*made);
  }
  return client_.get();
}

int Context::Fail(const absl::Status& status) {
  // A message may repeat what another party wrote (a job file's key, a server's words).
  const std::string shown = Printable(status.message(), /*keep_line_breaks=*/true);
  err_ << "jcctl: " << shown << "\n";
  return ExitCode(status);
}

absl::StatusOr<json> ReadDocument(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("give the file with -f FILE (JSON or YAML; - for stdin)");
  std::stringstream text;
  if (path == "-") {
    text << std::cin.rdbuf();
  } else {
    std::ifstream in(path);
    if (!in) return absl::InvalidArgumentError(absl::StrCat(path, ": cannot read it (no such file, or not allowed)"));
    text << in.rdbuf();
  }
  std::string body = text.str();
  size_t first = body.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return absl::InvalidArgumentError(absl::StrCat(path, ": the file is empty"));
  if (body[first] == '{') {
    json doc = json::parse(body, nullptr, false);
    if (doc.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(path, ": malformed JSON"));
    return doc;
  }
  try {
    json doc = FromYaml(YAML::Load(body));
    if (!doc.is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": not a mapping of fields (JSON or YAML)"));
    return doc;
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": malformed YAML at line ", e.mark.line + 1, ": ", e.msg));
  }
}

// The line of the file a server's refusal names a field of ("tasks[1].comand: no such
// field …"): the file's key at that path, when it is YAML or JSON laid out in lines. The
// status as it came when the path is not found (or the file was stdin).
absl::Status WithFileLine(const absl::Status& status, const std::string& path) {
  if (status.code() != absl::StatusCode::kInvalidArgument || path.empty() || path == "-") return status;
  const std::string message(status.message());
  const size_t colon = message.find(": ");
  if (colon == std::string::npos) return status;
  const std::string where = message.substr(0, colon);
  if (where.empty() || where.find(' ') != std::string::npos) return status;  // not a field's path
  // Read again only when it is a regular file (a FIFO or a terminal gave its text once).
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) return status;
  YAML::Node node;
  try {
    node = YAML::LoadFile(path);  // JSON is YAML too
  } catch (const YAML::Exception&) {
    return status;
  }
  // "tasks[1].comand", "labels[\"a.b\"]": keys and indexes in order.
  // The deepest part found: a field left out is told at the line of what holds it.
  std::optional<YAML::Mark> mark;
  [&] {
  size_t i = 0;
  while (i < where.size() && node.IsDefined()) {
    if (where[i] == '.') ++i;
    if (where[i] == '[') {
      size_t end = where.find(']', i);
      if (end == std::string::npos) return;
      std::string inside = where.substr(i + 1, end - i - 1);
      i = end + 1;
      if (inside.size() >= 2 && inside.front() == '"') {
        inside = inside.substr(1, inside.size() - 2);
      } else if (size_t index = 0; absl::SimpleAtoi(inside, &index) && node.IsSequence() && index < node.size()) {
        node.reset(node[index]);  // rebinds (operator= would write into the tree)
        mark = node.Mark();
        continue;
      } else {
        return;
      }
      if (!node.IsMap()) return;
      bool found = false;
      for (auto it = node.begin(); it != node.end(); ++it) {
        if (it->first.Scalar() == inside) {
          mark = it->first.Mark();
          node.reset(it->second);
          found = true;
          break;
        }
      }
      if (!found) return;
      continue;
    }
    size_t end = where.find_first_of(".[", i);
    std::string key = where.substr(i, end == std::string::npos ? std::string::npos : end - i);
    i = end == std::string::npos ? where.size() : end;
    if (!node.IsMap()) return;
    bool found = false;
    for (auto it = node.begin(); it != node.end(); ++it) {
      // The server names fields by their JSON names; a file may spell them snake_case.
      std::string spelled = it->first.Scalar();
      std::string camel;
      for (size_t k = 0; k < spelled.size(); ++k) {
        if (spelled[k] == '_' && k + 1 < spelled.size()) {
          camel += static_cast<char>(std::toupper(static_cast<unsigned char>(spelled[++k])));
        } else {
          camel += spelled[k];
        }
      }
      if (spelled == key || camel == key) {
        mark = it->first.Mark();
        node.reset(it->second);
        found = true;
        break;
      }
    }
    if (!found) return;
  }
  }();
  if (!mark.has_value() || mark->line < 0) return status;
  return absl::InvalidArgumentError(absl::StrCat(path, " line ", mark->line + 1, ": ", message));
}

std::vector<CommandSpec> Commands() {
  const std::string kCenters = "/openapi/v1/centers";
  const std::string kSpecs = "/openapi/v1/resourcespecs";
  const std::string kImages = "/openapi/v1/images";
  const std::string kDatasets = "/openapi/v1/datasets";
  const std::string kJobs = "/openapi/v1/trainjob";
  const FlagSpec kFile{"file", 'f', true, "the file (JSON or YAML; - for stdin)"};
  std::vector<CommandSpec> c;

  c.push_back({{"center", "list"}, "", "List the federation's centers", ListFlags({{"region", 0, true, "only this region"}}), 0, 0,
               ListCommand(kCenters, "centers", false, CenterColumns(),
                           [](const Invocation& inv) { return Query(inv, {{"region", "region"}}); })});
  c.push_back({{"center", "get"}, "CENTER", "One center", {}, 1, 1, GetCommand(kCenters, CenterColumns())});
  c.push_back({{"center", "create"}, "", "Register a center from a file (admins)", {kFile}, 0, 0,
               CreateCommand(kCenters, CenterColumns())});
  c.push_back({{"center", "delete"}, "CENTER", "Remove a center (admins)", {}, 1, 1,
               WithClient([kCenters](Context& ctx, Client* client, const Invocation& inv) {
                 auto done = client->Call("DELETE", kCenters + "/" + Escape(inv.args[0]));
                 if (!done.ok()) return ctx.Fail(done.status());
                 ctx.out() << "center " << inv.args[0] << " deleted\n";
                 return 0;
               })});

  std::vector<Column> spec_columns = {Field("SPEC", "resource_spec_id"), Field("NAME", "resource_spec_name"),
                                      Field("CPU", "resource_quantity.cpu"), Field("GPU", "resource_quantity.gpu"),
                                      Field("MEMORY", "resource_quantity.memory"), Field("TYPE", "service_type"),
                                      Field("PRICE", "price"), Field("CENTERS", "computing_center_list")};
  c.push_back({{"spec", "list"}, "", "List resource specs",
               ListFlags({{"center", 0, true, "only specs this center offers"}}), 0, 0,
               ListCommand(kSpecs, "specs", false, spec_columns,
                           [](const Invocation& inv) { return Query(inv, {{"center", "ai_center_id"}}); })});
  c.push_back({{"spec", "get"}, "SPEC", "One resource spec", {}, 1, 1, GetCommand(kSpecs, spec_columns)});
  c.push_back({{"spec", "create"}, "", "Add a resource spec from a file (admins)", {kFile}, 0, 0,
               CreateCommand(kSpecs, spec_columns)});

  std::vector<Column> image_columns = {Field("IMAGE", "image_id"), Field("NAME", "name"),
                                       Field("CENTER", "ai_center_id"), Field("FRAMEWORK", "framework"),
                                       Field("PROJECT", "project"), Field("PRESENT_AT", "present_at")};
  c.push_back({{"image", "list"}, "", "List images", ListFlags({{"center", 0, true, "only images at this center"}}), 0, 0,
               ListCommand(kImages, "images", false, image_columns,
                           [](const Invocation& inv) { return Query(inv, {{"center", "ai_center_id"}}); })});
  // Image ids are per project: --project says whose ("-": the federation's).
  c.push_back({{"image", "get"}, "IMAGE", "One image", {kImageProject}, 1, 1,
               GetCommand(kImages, image_columns, [](const Invocation& inv) { return Query(inv, {{"project", "project"}}); })});
  c.push_back({{"image", "create"}, "", "Register an image from a file", {kFile}, 0, 0,
               CreateCommand(kImages, image_columns)});

  std::vector<Column> dataset_columns = {
      Field("DATASET", "data_name"), Field("VERSION", "data_version"), Field("SIZE_MB", "size_mb"),
      Field("PROJECT", "project"),
      {"CENTERS", [](const json& d) {
         std::set<std::string> centers;
         for (const auto& l : d.value("location", json::array())) centers.insert(l.value("ai_center_id", ""));
         return centers.empty() ? std::string("-") : absl::StrJoin(centers, ",");
       }}};
  c.push_back({{"dataset", "list"}, "", "List datasets", ListFlags(), 0, 0,
               ListCommand(kDatasets, "datasets", false, dataset_columns)});
  c.push_back({{"dataset", "create"}, "", "Register a dataset and its locations from a file", {kFile}, 0, 0,
               CreateCommand(kDatasets, dataset_columns)});
  // Dataset names are per project: --project says whose ("-": the federation's).
  c.push_back({{"dataset", "get"}, "NAME VERSION", "One dataset version with its locations",
               {{"project", 0, true, "the dataset's project (\"-\": the federation's; default: yours, else the federation's)"}},
               2, 2,
               WithClient([kDatasets, dataset_columns](Context& ctx, Client* client, const Invocation& inv) {
                 auto got = client->Call("GET", kDatasets + "/" + Escape(inv.args[0]) + "/" + Escape(inv.args[1]) +
                                                    Query(inv, {{"project", "project"}}));
                 if (!got.ok()) return ctx.Fail(got.status());
                 return Show(ctx, *got, dataset_columns);
               })});

  c.push_back({{"job", "submit"}, "", "Submit a training job from a file (the body of POST /openapi/v1/trainjob)",
               {kFile,
                {"project", 0, true, "the job's project (the file's `project`; your only project when neither names one)"},
                {"quiet", 'q', false, "print only the job id"},
                {"idempotency_key", 0, true,
                 "a key of yours: submitting again with it (a retry after an error) returns the job it first made"}},
               0, 0, WithClient(SubmitJob)});
  c.push_back({{"job", "list"}, "", "List jobs",
               ListFlags({{"status", 0, true, "pending, running, completed or failed"},
                          {"project", 0, true, "only this project's jobs"},
                          {"user", 0, true, "only this user's jobs"},
                          {"center", 0, true, "only jobs with a replica placed at this center (at any attempt)"},
                          {"since", 0, true, "only jobs created at or after this date (2026-12-01) or instant"},
                          {"until", 0, true, "only jobs created before this date or instant"},
                          {"oldest", 0, false, "the oldest first (the newest come first otherwise)"}}),
               0, 0,
               ListCommand(kJobs, "jobs", true, JobColumns(), [](const Invocation& inv) {
                 std::string query = Query(inv, {{"status", "status"},
                                                 {"project", "project"},
                                                 {"user", "userName"},
                                                 {"center", "center"},
                                                 {"since", "createdAfter"},
                                                 {"until", "createdBefore"}});
                 if (inv.Has("oldest") && inv.Get("oldest") != "false") {
                   absl::StrAppend(&query, query.empty() ? "?" : "&", "order=oldest");
                 }
                 return query;
               })});
  c.push_back({{"job", "get"}, "JOB", "A job with each replica's status and center", {}, 1, 1,
               WithClient([kJobs](Context& ctx, Client* client, const Invocation& inv) {
                 auto got = client->Call("GET", kJobs + "/" + Escape(inv.args[0]));
                 if (!got.ok()) return ctx.Fail(got.status());
                 if (ctx.format() != Format::kTable) return Show(ctx, *got, {});
                 ctx.out() << Printable(Describe(*got), /*keep_line_breaks=*/true);
                 return 0;
               })});
  c.push_back({{"job", "history"}, "JOB",
               "Every attempt of every replica: where it ran, when, for how long, and how it ended (like sacct)", {},
               1, 1, WithClient([kJobs](Context& ctx, Client* client, const Invocation& inv) {
                 auto got = client->Call("GET", kJobs + "/" + Escape(inv.args[0]));
                 if (!got.ok()) return ctx.Fail(got.status());
                 json history = got->value("history", json::array());
                 if (ctx.format() == Format::kTable && history.empty()) {
                   ctx.out() << "job " << inv.args[0] << " has not been placed yet ("
                             << got->value("statusReason", got->value("status", "")) << ")\n";
                   return 0;
                 }
                 return Show(ctx, history, HistoryColumns(), [](const json& rows) { return rows; });
               })});
  c.push_back({{"job", "watch"}, "[JOB]",
               "Follow a job's events until it ends (exit 0: completed, 1: failed), or every job's",
               {{"since", 0, true, "resume after this event id"}}, 0, 1, WithClient(WatchJobs)});
  c.push_back({{"job", "logs"}, "JOB", "A replica's log",
               {{"task", 0, true, "task index (default 0)"},
                {"replica", 0, true, "replica index (default 0)"},
                {"follow", 'F', false, "keep printing what the replica writes until the job ends"}},
               1, 1, WithClient(JobLogs)});
  c.push_back({{"job", "stop"}, "JOB", "Stop a job", {}, 1, 1,
               WithClient([kJobs](Context& ctx, Client* client, const Invocation& inv) {
                 auto done = client->Call("POST", kJobs + "/" + Escape(inv.args[0]) + "/stop");
                 if (!done.ok()) return ctx.Fail(done.status());
                 ctx.out() << "job " << inv.args[0] << " stopping\n";
                 return 0;
               })});
  c.push_back({{"job", "scale"}, "JOB REPLICAS",
               "Scale a running service or streaming job's task to REPLICAS (1 to 1000): more start, fewer stop the "
               "highest-numbered",
               {{"task", 0, true, "task index (default 0)"}}, 2, 2,
               WithClient([kJobs](Context& ctx, Client* client, const Invocation& inv) {
                 int task = 0, replicas = 0;
                 if (!absl::SimpleAtoi(inv.Get("task", "0"), &task) || task < 0) {
                   return ctx.Fail(absl::InvalidArgumentError(absl::StrCat("task: \"", inv.Get("task"), "\" is not an index")));
                 }
                 if (!absl::SimpleAtoi(inv.args[1], &replicas)) {
                   return ctx.Fail(absl::InvalidArgumentError(
                       absl::StrCat("REPLICAS: \"", inv.args[1], "\" is not a number of replicas (1 to 1000)")));
                 }
                 json body = {{"taskIndex", task}, {"replicaNumber", replicas}};
                 auto done = client->Call("POST", kJobs + "/" + Escape(inv.args[0]) + "/scale", &body);
                 if (!done.ok()) return ctx.Fail(done.status());
                 if (ctx.format() != Format::kTable) return Show(ctx, *done, {});
                 ctx.out() << "job " << inv.args[0] << " task " << task << ": " << done->value("previousReplicaNumber", 0)
                           << " -> " << done->value("replicaNumber", replicas) << " replicas\n";
                 return 0;
               })});
  c.push_back({{"job", "open"}, "JOB",
               "A link that opens a running replica's named port in a browser (a notebook, a service's page): it "
               "works once, within a minute, and only for members of the job's project",
               {{"task", 0, true, "task index (default 0)"},
                {"replica", 0, true, "replica index (default 0)"},
                {"port", 0, true, "the port's name (default: the task's only one)"},
                {"path", 0, true, "where the browser lands (default /)"},
                {"all", 0, false, "the task's endpoint: each connection goes to one of its ready replicas in turn"}},
               1, 1,
               WithClient([kJobs](Context& ctx, Client* client, const Invocation& inv) {
                 int task = 0, replica = 0;
                 if (!absl::SimpleAtoi(inv.Get("task", "0"), &task) || task < 0) {
                   return ctx.Fail(absl::InvalidArgumentError(absl::StrCat("task: \"", inv.Get("task"), "\" is not an index")));
                 }
                 if (!absl::SimpleAtoi(inv.Get("replica", "0"), &replica) || replica < 0) {
                   return ctx.Fail(
                       absl::InvalidArgumentError(absl::StrCat("replica: \"", inv.Get("replica"), "\" is not an index")));
                 }
                 std::string port = inv.Get("port", "");
                 if (port.empty()) {
                   // The task's only port, as the job reports its endpoints.
                   auto job = client->Call("GET", kJobs + "/" + Escape(inv.args[0]));
                   if (!job.ok()) return ctx.Fail(job.status());
                   std::set<std::string> names;
                   auto tasks = job->value("taskInfos", json::array());
                   if (task < static_cast<int>(tasks.size())) {
                     for (const auto& e : tasks[task].value("endpoints", json::array())) names.insert(e.value("name", ""));
                   }
                   if (names.size() != 1) {
                     return ctx.Fail(absl::InvalidArgumentError(
                         names.empty() ? absl::StrCat("task ", task, " of ", inv.args[0], " reports no endpoints (yet)")
                                       : absl::StrCat("task ", task, " has ports ", absl::StrJoin(names, ", "),
                                                      ": name one with --port")));
                   }
                   port = *names.begin();
                 }
                 json body = {{"taskIndex", task}, {"replicaIndex", replica}, {"portName", port},
                              {"path", inv.Get("path", "")}, {"allReplicas", inv.Has("all")}};
                 auto done = client->Call("POST", kJobs + "/" + Escape(inv.args[0]) + "/open", &body);
                 if (!done.ok()) return ctx.Fail(done.status());
                 if (ctx.format() != Format::kTable) return Show(ctx, *done, {});
                 ctx.out() << done->value("url", "") << "\n";
                 ctx.err() << "opens once, until " << done->value("expiresAt", "") << "; then the browser keeps it open\n";
                 return 0;
               })});
  c.push_back({{"job", "explain"}, "JOB", "Why the job went where it did: every center's filter or scores", {}, 1, 1,
               WithClient([kJobs](Context& ctx, Client* client, const Invocation& inv) {
                 auto got = client->Call("GET", kJobs + "/" + Escape(inv.args[0]) + "/placement");
                 if (!got.ok()) return ctx.Fail(got.status());
                 if (ctx.format() != Format::kTable) return Show(ctx, *got, {});
                 ctx.out() << Printable(DescribePlacement(*got), /*keep_line_breaks=*/true);
                 return 0;
               })});
  c.push_back({{"plan"}, "", "Dry run: where a job file would go now, and why, without submitting it",
               {kFile, {"project", 0, true, "the job's project, as for job submit"}}, 0, 0,
               WithClient([](Context& ctx, Client* client, const Invocation& inv) {
                 auto doc = ReadDocument(inv.Get("file"));
                 if (!doc.ok()) return ctx.Fail(doc.status());
                 if (absl::Status s = WithProject(inv, *doc); !s.ok()) return ctx.Fail(s);
                 auto got = client->Call("POST", "/openapi/v1/scheduler/plan", &*doc);
                 if (!got.ok()) return ctx.Fail(WithFileLine(got.status(), inv.Get("file")));
                 if (ctx.format() != Format::kTable) return Show(ctx, *got, {});
                 ctx.out() << Printable(DescribePlacement(*got), /*keep_line_breaks=*/true);
                 return 0;
               })});

  std::vector<Column> usage_columns = {
      Field("CENTER", "ai_center_id"), Field("REACHABLE", "reachable"), Field("RUNNING", "running_task_num"),
      Field("WAITING", "waiting_task_num"), Field("CPU_USED", "used.cpu"), Field("CPU_FREE", "free.cpu"),
      Field("GPU_USED", "used.gpu"), Field("GPU_FREE", "free.gpu"), Field("MEM_FREE_MB", "free.memory"),
      Field("OBSERVED", "observed_at")};
  c.push_back({{"center", "usage"}, "[CENTER]", "What each center runs and has free (the monitor's latest view)", {}, 0, 1,
               WithClient([usage_columns](Context& ctx, Client* client, const Invocation& inv) {
                 if (!inv.args.empty()) {
                   auto got = client->Call("GET", "/openapi/v1/centers/" + Escape(inv.args[0]) + "/usage");
                   if (!got.ok()) return ctx.Fail(got.status());
                   return Show(ctx, *got, usage_columns);
                 }
                 auto got = client->Call("GET", "/openapi/v1/usage");
                 if (!got.ok()) return ctx.Fail(got.status());
                 return Show(ctx, *got, usage_columns, [](const json& v) { return v.value("usage", json::array()); });
               })});

  // Accounting (issue 31): what ran, as the centers measured it, and what it cost.
  const std::vector<FlagSpec> period_flags = {
      {"month", 0, true, "the period is this month (2026-11)"},
      {"from", 0, true, "period start: a month, a day (2026-11-26) or an RFC 3339 instant"},
      {"to", 0, true, "period end (exclusive; a month or day means its end)"}};
  std::vector<FlagSpec> usage_flags = ListFlags({{"project", 0, true, "only this project's"},
                                                 {"user", 0, true, "only this user's"},
                                                 {"center", 0, true, "only this center's"},
                                                 {"job", 0, true, "only this job's"}});
  usage_flags.insert(usage_flags.end(), period_flags.begin(), period_flags.end());
  c.push_back({{"usage"}, "",
               "Usage records: one per replica attempt that ran, what it used and what it cost (like sacct)",
               usage_flags, 0, 0,
               ListCommand("/openapi/v1/accounting/records", "records", true, UsageRecordColumns(),
                           [](const Invocation& inv) {
                             return Query(inv, {{"project", "project"}, {"user", "userName"}, {"center", "center"},
                                                {"job", "jobId"}, {"month", "month"}, {"from", "from"}, {"to", "to"}});
                           })});
  std::vector<FlagSpec> report_flags = {
      {"by", 0, true, "what each row is per, comma-separated: project, user, center, spec (default project,center)"},
      {"granularity", 0, true, "day or month (default: the whole period in one)"},
      {"project", 0, true, "only this project's"},
      {"center", 0, true, "only this center's"},
      {"user", 0, true, "only this user's"}};
  report_flags.insert(report_flags.end(), period_flags.begin(), period_flags.end());
  c.push_back({{"report"}, "", "Usage and cost summed per project, center, user or spec over a period (default: this month)",
               report_flags, 0, 0, WithClient(UsageReport)});

  const std::string kSettlements = "/openapi/v1/accounting/settlements";
  std::vector<Column> settlement_columns = {Field("MONTH", "month"), Field("FROM", "firstMonth"),
                                            Field("STATUS", "status"), Number("ATTEMPTS", "total.records", 0),
                                            Number("COST", "total.cost", 2), Field("CLOSED", "closedAt"),
                                            Field("BY", "closedBy"), Field("DIGEST", "digest")};
  c.push_back({{"settlement", "list"}, "", "Settlement periods closed so far, with their totals and digests", {}, 0, 0,
               WithClient([kSettlements, settlement_columns](Context& ctx, Client* client, const Invocation&) {
                 auto got = client->Call("GET", kSettlements);
                 if (!got.ok()) return ctx.Fail(got.status());
                 return Show(ctx, *got, settlement_columns,
                             [](const json& v) { return v.value("statements", json::array()); });
               })});
  c.push_back({{"settlement", "get"}, "MONTH",
               "A month's statement: what each project owes each center (frozen once closed)",
               {{"center", 0, true, "only this center's lines"}}, 1, 1,
               WithClient([kSettlements](Context& ctx, Client* client, const Invocation& inv) {
                 auto got = client->Call("GET", kSettlements + "/" + Escape(inv.args[0]) +
                                                    Query(inv, {{"center", "center"}}));
                 if (!got.ok()) return ctx.Fail(got.status());
                 return ShowStatement(ctx, *got);
               })});
  c.push_back({{"settlement", "close"}, "MONTH",
               "Close the settlement through MONTH (admins): its statement is frozen with a digest", {}, 1, 1,
               WithClient([kSettlements](Context& ctx, Client* client, const Invocation& inv) {
                 auto got = client->Call("POST", kSettlements + "/" + Escape(inv.args[0]) + "/close");
                 if (!got.ok()) return ctx.Fail(got.status());
                 return ShowStatement(ctx, *got);
               })});

  // Utilisation against offered capacity (issue 49 item 12), per center and month, with the
  // months before as the trend (like sreport's cluster utilization).
  c.push_back({{"utilisation"}, "",
               "Each center's offered capacity against what its replicas were allocated, its revenue and idle "
               "hours, for a month (default: this one, so far) and the months before it (admins, centers' operators)",
               {{"month", 0, true, "the month (2026-11)"},
                {"center", 0, true, "only this center"},
                {"trend", 0, true, "months before it to show too (default 5, at most 24)"}},
               0, 0, WithClient([](Context& ctx, Client* client, const Invocation& inv) {
                 auto got = client->Call("GET", "/openapi/v1/accounting/utilisation" +
                                                    Query(inv, {{"month", "month"}, {"center", "center"},
                                                                {"trend", "trendMonths"}}));
                 if (!got.ok()) return ctx.Fail(got.status());
                 // One flat row per center and month: its cpu and gpu side by side.
                 auto flat = [](const json& rows) {
                   json out = json::array();
                   for (const auto& c : rows) {
                     json row = {{"center", c.value("aiCenterId", "")},
                                 {"month", c.value("month", "") + (c.value("partial", false) ? " (so far)" : "")},
                                 {"revenue", c.value("revenue", 0.0)},
                                 {"records", c.value("records", json("0"))}};
                     for (const auto& r : c.value("resources", json::array())) {
                       const std::string name = r.value("resource", "");
                       row[name + "Offered"] = r.value("offeredHours", 0.0);
                       row[name + "Used"] = r.value("usedHours", 0.0);
                       row[name + "Idle"] = r.value("idleHours", 0.0);
                       row[name + "Percent"] = 100 * r.value("ratio", 0.0);
                     }
                     out.push_back(std::move(row));
                   }
                   return out;
                 };
                 std::vector<Column> columns = {
                     Field("CENTER", "center"),         Field("MONTH", "month"),
                     Number("CPU_OFFERED_H", "cpuOffered", 1), Number("CPU_USED_H", "cpuUsed", 1),
                     Number("CPU_%", "cpuPercent", 1),  Number("CPU_IDLE_H", "cpuIdle", 1),
                     Number("GPU_OFFERED_H", "gpuOffered", 1), Number("GPU_USED_H", "gpuUsed", 1),
                     Number("GPU_%", "gpuPercent", 1),  Number("REVENUE", "revenue", 2),
                     Number("ATTEMPTS", "records", 0)};
                 if (ctx.format() != Format::kTable) return Show(ctx, *got, columns, [](const json& v) { return v; });
                 const json month = flat(got->value("centers", json::array()));
                 if (month.empty()) {
                   ctx.out() << "no center offered capacity or ran anything in " << got->value("month", "") << "\n";
                 } else {
                   ctx.out() << Table(month, columns);
                 }
                 const json trend = flat(got->value("trend", json::array()));
                 if (!trend.empty()) ctx.out() << "\nThe months before:\n" << Table(trend, columns);
                 return 0;
               })});

  std::vector<FlagSpec> reconcile_flags = {{"tolerance_seconds", 0, true, "figures agree within this (default 5)"},
                                           {"tolerance_ratio", 0, true, "or within this share (default 0.05)"}};
  reconcile_flags.insert(reconcile_flags.end(), period_flags.begin(), period_flags.end());
  c.push_back({{"reconcile"}, "CENTER",
               "The federation's usage records of a center against the center's own accounting, every difference "
               "listed (default: this month)",
               reconcile_flags, 1, 1, WithClient([](Context& ctx, Client* client, const Invocation& inv) {
                 Invocation q = inv;
                 if (!q.Has("month") && !q.Has("from") && !q.Has("to")) {
                   q.flags["month"] = absl::FormatTime("%Y-%m", absl::Now(), absl::UTCTimeZone());
                 }
                 auto got = client->Call("GET", "/openapi/v1/accounting/reconciliation?center=" + Escape(inv.args[0]) +
                                                    "&" +
                                                    Query(q, {{"month", "month"}, {"from", "from"}, {"to", "to"},
                                                              {"tolerance_seconds", "toleranceSeconds"},
                                                              {"tolerance_ratio", "toleranceRatio"}})
                                                        .substr(1));
                 if (!got.ok()) return ctx.Fail(got.status());
                 std::vector<Column> columns = {Field("KIND", "kind"), Field("RECORD", "recordId"),
                                                Field("FIELD", "field"), Number("FEDERATION", "federation", 1),
                                                Number("CENTER", "center", 1), Field("DETAIL", "detail")};
                 if (ctx.format() != Format::kTable) {
                   return Show(ctx, *got, columns, [](const json& v) { return v.value("differences", json::array()); });
                 }
                 ctx.out() << "center " << got->value("aiCenterId", "") << " (" << got->value("centerSource", "")
                           << "): " << Number("", "federationRecords", 0).cell(*got) << " records, "
                           << Number("", "centerEntries", 0).cell(*got) << " runs at the center, "
                           << Number("", "matched", 0).cell(*got) << " agree, "
                           << got->value("differences", json::array()).size() << " differences\n";
                 if (!got->value("differences", json::array()).empty()) {
                   ctx.out() << Table(got->value("differences", json::array()), columns);
                 }
                 return got->value("differences", json::array()).empty() ? 0 : 1;
               })});

  std::vector<Column> token_columns = {Field("TOKEN", "token_id"), Field("USER", "user_name"),
                                       Field("DESCRIPTION", "description"), Field("CREATED", "created_at"),
                                       Field("EXPIRES", "expires_at"), Field("REVOKED", "revoked_at"),
                                       Field("LAST_USED", "last_used_at")};
  c.push_back({{"token", "list"}, "", "List API tokens (admins: everyone's; others: their own)",
               ListFlags({{"user", 0, true, "only this user's tokens"}}), 0, 0,
               ListCommand("/openapi/v1/tokens", "tokens", false, token_columns,
                           [](const Invocation& inv) { return Query(inv, {{"user", "user_name"}}); })});
  c.push_back({{"token", "create"}, "", "Create an API token; its secret is shown once",
               {{"user", 0, true, "for this user (admins); default: yourself"},
                {"description", 0, true, "what it is for"},
                {"ttl", 0, true, "how long it lasts: seconds or a duration, 90m, 12h, 30d (default: it does not expire)"}},
               0, 0, WithClient(CreateToken)});
  c.push_back({{"token", "revoke"}, "TOKEN", "Revoke an API token (admins)", {}, 1, 1,
               WithClient([](Context& ctx, Client* client, const Invocation& inv) {
                 auto done = client->Call("POST", "/openapi/v1/tokens/" + Escape(inv.args[0]) + "/revoke");
                 if (!done.ok()) return ctx.Fail(done.status());
                 ctx.out() << "token " << inv.args[0] << " revoked\n";
                 return 0;
               })});
  c.push_back({{"whoami"}, "", "Who the server takes you for, with your roles", {}, 0, 0,
               WithClient([](Context& ctx, Client* client, const Invocation&) {
                 auto got = client->Call("GET", "/openapi/v1/whoami");
                 if (!got.ok()) return ctx.Fail(got.status());
                 if (ctx.format() != Format::kTable) return Show(ctx, *got, {});
                 ctx.out() << Yaml(*got);
                 return 0;
               })});
  for (CommandSpec& more : OperatorCommands()) c.push_back(std::move(more));
  for (CommandSpec& more : SessionCommands()) c.push_back(std::move(more));
  c.push_back({{"version"}, "", "jcctl's version", {}, 0, 0, [](Context& ctx, const Invocation&) {
                 ctx.out() << VersionLine("jcctl") << "\n";
                 return 0;
               }});
  return c;
}

}  // namespace jc::jcctl
