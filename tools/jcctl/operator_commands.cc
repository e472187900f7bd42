// jcctl for operators (issue 33 item 5): users and their project roles, projects with their
// quotas and budgets, and the federation's centers, specs and images changed or removed,
// so that nobody is back to curl for the day-to-day (like sacctmgr for Slurm's accounts).

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tools/jcctl/command_kit.h"

namespace jc::jcctl {

using nlohmann::json;

namespace {

const FlagSpec kFile{"file", 'f', true, "the file (JSON or YAML; - for stdin): the fields to change"};

// Runs `method path` with `body` and prints `done` (or the answer, for -o json|yaml).
int Change(Context& ctx, Client* client, const std::string& method, const std::string& path, const json* body,
           const std::string& done) {
  auto answer = client->Call(method, path, body);
  if (!answer.ok()) return ctx.Fail(answer.status());
  if (ctx.format() == Format::kJson || ctx.format() == Format::kYaml) return Show(ctx, *answer, {});
  ctx.out() << done << "\n";
  return 0;
}

// PATCH `prefix`/ID with the file's fields.
Run UpdateCommand(std::string prefix, std::string noun, std::function<std::string(const Invocation&)> query = nullptr) {
  return WithClient([=](Context& ctx, Client* client, const Invocation& inv) {
    auto doc = ReadDocument(inv.Get("file"));
    if (!doc.ok()) return ctx.Fail(doc.status());
    return Change(ctx, client, "PATCH", prefix + "/" + Escape(inv.args[0]) + (query ? query(inv) : ""), &*doc,
                  absl::StrCat(noun, " ", inv.args[0], " updated"));
  });
}

Run DeleteCommand(std::string prefix, std::string noun, std::function<std::string(const Invocation&)> query = nullptr) {
  return WithClient([=](Context& ctx, Client* client, const Invocation& inv) {
    return Change(ctx, client, "DELETE", prefix + "/" + Escape(inv.args[0]) + (query ? query(inv) : ""), nullptr,
                  absl::StrCat(noun, " ", inv.args[0], " deleted"));
  });
}

// A non-negative whole number flag; `out` untouched when it is absent.
absl::Status CountFlag(const Invocation& inv, const std::string& flag, int64_t* out) {
  if (!inv.Has(flag)) return absl::OkStatus();
  if (!absl::SimpleAtoi(inv.Get(flag), out) || *out < 0) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": \"", inv.Get(flag), "\" is not a count (0 = no limit)"));
  }
  return absl::OkStatus();
}

std::vector<Column> UserColumns() {
  return {Field("USER", "name"), Field("DISPLAY_NAME", "display_name"), Field("ADMIN", "federation_admin"),
          {"PROJECTS", [](const json& u) {
             std::vector<std::string> roles;
             for (const auto& m : u.value("memberships", json::array())) {
               roles.push_back(absl::StrCat(m.value("project", ""), ":", m.value("role", "")));
             }
             return roles.empty() ? std::string("-") : absl::StrJoin(roles, ",");
           }},
          {"OPERATES", [](const json& u) {
             std::vector<std::string> centers;
             for (const auto& c : u.value("operator_of", json::array())) centers.push_back(c.get<std::string>());
             return centers.empty() ? std::string("-") : absl::StrJoin(centers, ",");
           }},
          Field("CREATED", "created_at")};
}

std::vector<Column> ProjectColumns() {
  return {Field("PROJECT", "name"),
          Field("DESCRIPTION", "description"),
          Field("MAX_GPUS", "quota.max_running_gpus"),
          Field("MAX_CPUS", "quota.max_running_cpus"),
          Field("MAX_QUEUED", "quota.max_queued_jobs"),
          Field("MAX_PRIO", "quota.max_priority"),
          Field("BUDGET", "budget.monthly"),
          Field("HARD", "budget.hard"),
          Field("CREATED", "created_at")};
}

}  // namespace

std::vector<CommandSpec> OperatorCommands() {
  const std::string kUsers = "/openapi/v1/users";
  const std::string kProjects = "/openapi/v1/projects";
  const std::string kCenters = "/openapi/v1/centers";
  std::vector<CommandSpec> c;

  // ---- Users ----
  c.push_back({{"user", "list"}, "", "List users with their project roles and the centers they operate (admins)",
               ListFlags(), 0, 0, ListCommand(kUsers, "users", false, UserColumns())});
  c.push_back({{"user", "get"}, "USER", "One user (admins)", {}, 1, 1, GetCommand(kUsers, UserColumns())});
  c.push_back({{"user", "create"}, "USER", "Create a user (admins)",
               {{"display_name", 0, true, "the name people read"},
                {"admin", 0, false, "a federation admin: may do everything"},
                {"operator_of", 0, true, "centers the user operates, comma-separated"},
                {"accepts_oidc", 0, false, "an OIDC token naming this user is this user"}},
               1, 1, WithClient([kUsers](Context& ctx, Client* client, const Invocation& inv) {
                 json user = {{"name", inv.args[0]}};
                 if (inv.Has("display_name")) user["display_name"] = inv.Get("display_name");
                 if (inv.Has("admin")) user["federation_admin"] = true;
                 if (inv.Has("accepts_oidc")) user["accepts_oidc"] = true;
                 if (inv.Has("operator_of")) {
                   json centers = json::array();
                   for (absl::string_view id : absl::StrSplit(inv.Get("operator_of"), ',', absl::SkipEmpty())) {
                     centers.push_back(std::string(id));
                   }
                   user["operator_of"] = centers;
                 }
                 auto made = client->Call("POST", kUsers, &user);
                 if (!made.ok()) return ctx.Fail(made.status());
                 return Show(ctx, *made, UserColumns());
               })});
  c.push_back({{"user", "delete"}, "USER", "Delete a user and its tokens (admins)", {}, 1, 1,
               DeleteCommand(kUsers, "user")});

  // ---- Project roles ----
  c.push_back({{"member", "set"}, "USER PROJECT", "Give a user a role in a project (admins, the project's owners)",
               {{"role", 0, true, "viewer, member or owner (default member)"}}, 2, 2,
               WithClient([kUsers](Context& ctx, Client* client, const Invocation& inv) {
                 std::string role = absl::AsciiStrToUpper(inv.Get("role", "member"));
                 if (role != "VIEWER" && role != "MEMBER" && role != "OWNER") {
                   return ctx.Fail(absl::InvalidArgumentError(
                       absl::StrCat("role: \"", inv.Get("role"), "\" is not viewer, member or owner")));
                 }
                 json body = {{"role", role}};
                 return Change(ctx, client, "PUT",
                               kUsers + "/" + Escape(inv.args[0]) + "/projects/" + Escape(inv.args[1]), &body,
                               absl::StrCat(inv.args[0], " is ", absl::AsciiStrToLower(role), " of ", inv.args[1]));
               })});
  c.push_back({{"member", "remove"}, "USER PROJECT", "Take a user's role in a project away", {}, 2, 2,
               WithClient([kUsers](Context& ctx, Client* client, const Invocation& inv) {
                 return Change(ctx, client, "DELETE",
                               kUsers + "/" + Escape(inv.args[0]) + "/projects/" + Escape(inv.args[1]), nullptr,
                               absl::StrCat(inv.args[0], " is no longer in ", inv.args[1]));
               })});

  // ---- Projects ----
  c.push_back({{"project", "list"}, "", "List projects with their quotas and budgets (admins)", ListFlags(), 0, 0,
               ListCommand(kProjects, "projects", false, ProjectColumns())});
  c.push_back({{"project", "get"}, "PROJECT", "One project with its quota and budget (admins and the project's members)", {}, 1, 1, GetCommand(kProjects, ProjectColumns())});
  c.push_back({{"project", "create"}, "PROJECT", "Create a project (admins)",
               {{"description", 0, true, "what the project is"}}, 1, 1,
               WithClient([kProjects](Context& ctx, Client* client, const Invocation& inv) {
                 json project = {{"name", inv.args[0]}};
                 if (inv.Has("description")) project["description"] = inv.Get("description");
                 auto made = client->Call("POST", kProjects, &project);
                 if (!made.ok()) return ctx.Fail(made.status());
                 return Show(ctx, *made, ProjectColumns());
               })});
  c.push_back({{"project", "delete"}, "PROJECT", "Delete a project with no members (admins)", {}, 1, 1,
               DeleteCommand(kProjects, "project")});
  c.push_back({{"quota", "set"}, "PROJECT",
               "What a project may hold at once across the federation, and the highest priority its jobs may ask "
               "(admins); 0 = no limit (priority: none above 0); flags not given are 0",
               {{"gpus", 0, true, "GPUs of its running replicas"},
                {"cpus", 0, true, "CPUs of its running replicas"},
                {"queued", 0, true, "jobs waiting for a center"},
                {"priority", 0, true, "the highest scheduling.priority its jobs may ask, 0 to 1000000"}},
               1, 1, WithClient([kProjects](Context& ctx, Client* client, const Invocation& inv) {
                 int64_t gpus = 0, cpus = 0, queued = 0, priority = 0;
                 for (auto [flag, out] :
                      {std::pair{"gpus", &gpus}, {"cpus", &cpus}, {"queued", &queued}, {"priority", &priority}}) {
                   if (absl::Status s = CountFlag(inv, flag, out); !s.ok()) return ctx.Fail(s);
                 }
                 json body = {{"max_running_gpus", gpus},
                              {"max_running_cpus", cpus},
                              {"max_queued_jobs", queued},
                              {"max_priority", priority}};
                 return Change(ctx, client, "PUT", kProjects + "/" + Escape(inv.args[0]) + "/quota", &body,
                               absl::StrCat("quota of ", inv.args[0], ": ", gpus, " GPUs, ", cpus, " CPUs, ", queued,
                                            " queued jobs (0 = no limit), priority up to ", priority));
               })});
  c.push_back({{"budget", "set"}, "PROJECT",
               "A project's monthly budget in the catalog's price unit (admins); 0 = none",
               {{"monthly", 0, true, "the amount per calendar month (UTC)"},
                {"hard", 0, false, "refuse the project's new jobs once it is spent (else only say so)"},
                {"stop_running", 0, false, "with --hard: stop its running jobs too"}},
               1, 1, WithClient([kProjects](Context& ctx, Client* client, const Invocation& inv) {
                 double monthly = 0;
                 if (!absl::SimpleAtod(inv.Get("monthly", "0"), &monthly)) {
                   return ctx.Fail(absl::InvalidArgumentError(
                       absl::StrCat("monthly: \"", inv.Get("monthly"), "\" is not an amount")));
                 }
                 json body = {{"monthly", monthly}, {"hard", inv.Has("hard")}, {"stop_running", inv.Has("stop_running")}};
                 return Change(ctx, client, "PUT", kProjects + "/" + Escape(inv.args[0]) + "/budget", &body,
                               absl::StrCat("budget of ", inv.args[0], ": ", inv.Get("monthly", "0"), " a month",
                                            inv.Has("hard") ? " (hard)" : " (soft)"));
               })});

  // ---- The federation's resources ----
  c.push_back({{"center", "update"}, "CENTER", "Change the fields of a center the file names (admins, its operators)",
               {kFile}, 1, 1, UpdateCommand(kCenters, "center")});
  c.push_back({{"center", "heartbeat"}, "CENTER", "Report a center alive (or not, with --unhealthy)",
               {{"unhealthy", 0, false, "report it unhealthy"}}, 1, 1,
               WithClient([kCenters](Context& ctx, Client* client, const Invocation& inv) {
                 json body = json::object();
                 if (inv.Has("unhealthy")) body["healthy"] = false;
                 return Change(ctx, client, "POST", kCenters + "/" + Escape(inv.args[0]) + "/heartbeat", &body,
                               absl::StrCat("center ", inv.args[0], inv.Has("unhealthy") ? " reported unhealthy"
                                                                                          : " reported alive"));
               })});
  c.push_back({{"center", "issue-key"}, "CENTER",
               "Issue the center a new adapter key (admins, its operators): written to --key_file (mode 0600) for "
               "its adapter's --center_key_file, or shown once; the key it replaces works for a grace period",
               {{"key_file", 0, true, "write the key here (created or replaced, mode 0600) instead of showing it"}}, 1, 1,
               WithClient([kCenters](Context& ctx, Client* client, const Invocation& inv) {
                 json body = json::object();
                 auto issued = client->Call("POST", kCenters + "/" + Escape(inv.args[0]) + "/adapterkey", &body);
                 if (!issued.ok()) return ctx.Fail(issued.status());
                 const std::string key = issued->value("adapter_key", "");
                 std::string until = issued->value("previous_valid_until", "");
                 if (inv.Has("key_file")) {
                   const std::string path = inv.Get("key_file");
                   // Never through a link, never readable by others, even for an instant.
                   int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
                   bool written = fd >= 0 && fchmod(fd, 0600) == 0 &&
                                  write(fd, (key + "\n").data(), key.size() + 1) == static_cast<ssize_t>(key.size() + 1);
                   int error = errno;
                   if (fd >= 0) written = close(fd) == 0 && written;
                   if (!written) {
                     return ctx.Fail(absl::UnavailableError(absl::StrCat(
                         "the key was issued but not written to ", path, ": ", std::strerror(error),
                         " (issue another; the one issued is unknown to anyone)")));
                   }
                   ctx.out() << "adapter key of center " << inv.args[0] << " written to " << path << "\n";
                 } else if (ctx.format() != Format::kTable) {
                   return Show(ctx, *issued, {});
                 } else {
                   ctx.out() << "adapter key of center " << inv.args[0] << " (shown only now): " << key << "\n";
                 }
                 if (!until.empty()) ctx.out() << "the key it replaces works until " << until << "\n";
                 return 0;
               })});
  c.push_back({{"spec", "update"}, "SPEC", "Change the fields of a resource spec the file names (admins)", {kFile}, 1, 1,
               UpdateCommand("/openapi/v1/resourcespecs", "spec")});
  c.push_back({{"spec", "delete"}, "SPEC", "Remove a resource spec (admins)", {}, 1, 1,
               DeleteCommand("/openapi/v1/resourcespecs", "spec")});
  c.push_back({{"spec", "price"}, "SPEC CENTER PRICE",
               "Set a spec's price per hour at a center, a decimal (\"12\", \"0.75\"; admins, its operators)",
               {{"from", 0, true, "in force from this date (2026-12-01: midnight UTC) or instant (RFC 3339 with its zone); default now"}}, 3, 3,
               WithClient([](Context& ctx, Client* client, const Invocation& inv) {
                 // Sent as text: the catalog reads it exactly (no binary fraction on the way)
                 // and says what is wrong with it.
                 json body = {{"price", inv.args[2]}};
                 if (inv.Has("from")) body["effective_from"] = inv.Get("from");
                 return Change(ctx, client, "PUT",
                               "/openapi/v1/resourcespecs/" + Escape(inv.args[0]) + "/centers/" + Escape(inv.args[1]) +
                                   "/price",
                               &body,
                               absl::StrCat(inv.args[0], " at ", inv.args[1], " costs ", inv.args[2], " an hour",
                                            inv.Has("from") ? " from " + inv.Get("from") : ""));
               })});
  // What each center charges for a spec: its own price or the spec's, now and as scheduled
  // (`spec get` shows the spec's own price, not a center's).
  c.push_back({{"spec", "offers"}, "SPEC", "Each center's offer of a spec: can it run it, its price now and the prices scheduled",
               {}, 1, 1,
               WithClient([](Context& ctx, Client* client, const Invocation& inv) {
                 auto got = client->Call("GET", "/openapi/v1/resourcespecs/" + Escape(inv.args[0]) + "/centers");
                 if (!got.ok()) return ctx.Fail(got.status());
                 const std::string now = absl::FormatTime(absl::RFC3339_sec, absl::Now(), absl::UTCTimeZone());
                 std::vector<Column> columns = {
                     Field("CENTER", "ai_center_id"), Field("CAN_RUN", "can_run"), Field("PRICE_NOW", "price"),
                     Column{"SCHEDULED", [now](const json& offer) {
                              std::vector<std::string> later;
                              for (const auto& p : offer.value("prices", json::array())) {
                                const std::string from = p.value("effective_from", "");
                                // RFC 3339 in UTC compares as text.
                                if (from > now) later.push_back(absl::StrCat(p.value("price", json(0)).dump(), " from ", from));
                              }
                              return later.empty() ? std::string("-") : absl::StrJoin(later, "; ");
                            }},
                     Field("FREE", "free_instances"), Field("REASON", "reason")};
                 return Show(ctx, *got, columns, [](const json& v) { return v.value("offers", json::array()); });
               })});
  auto image_project = [](const Invocation& inv) { return Query(inv, {{"project", "project"}}); };
  c.push_back({{"image", "update"}, "IMAGE", "Change the fields of an image the file names", {kFile, kImageProject}, 1, 1,
               UpdateCommand("/openapi/v1/images", "image", image_project)});
  c.push_back({{"image", "delete"}, "IMAGE", "Remove an image", {kImageProject}, 1, 1,
               DeleteCommand("/openapi/v1/images", "image", image_project)});

  // What completion offers for an argument (and scripts may use): the server's ids.
  c.push_back({{"ids"}, "KIND",
               "The ids of KIND the server has, one per line (at most 500): jobs, centers, specs, images, users, "
               "projects, tokens (what shell completion offers)",
               {}, 1, 1, WithClient([](Context& ctx, Client* client, const Invocation& inv) {
                 struct Kind {
                   const char* path;
                   const char* key;
                   bool camel;
                   const char* id;
                 };
                 static const std::map<std::string, Kind> kinds = {
                     {"jobs", {"/openapi/v1/trainjob", "jobs", true, "jobId"}},
                     {"centers", {"/openapi/v1/centers", "centers", false, "ai_center_id"}},
                     {"specs", {"/openapi/v1/resourcespecs", "specs", false, "resource_spec_id"}},
                     {"images", {"/openapi/v1/images", "images", false, "image_id"}},
                     {"users", {"/openapi/v1/users", "users", false, "name"}},
                     {"projects", {"/openapi/v1/projects", "projects", false, "name"}},
                     {"tokens", {"/openapi/v1/tokens", "tokens", false, "token_id"}}};
                 auto kind = kinds.find(inv.args[0]);
                 if (kind == kinds.end()) {
                   return ctx.Fail(absl::InvalidArgumentError(absl::StrCat(
                       "ids: \"", inv.args[0], "\" is not a kind: jobs, centers, specs, images, users, projects, tokens")));
                 }
                 auto items = ListAll(client, kind->second.path, kind->second.key, kind->second.camel, 500);
                 if (!items.ok()) return ctx.Fail(items.status());
                 for (const json& item : *items) ctx.out() << item.value(kind->second.id, "") << "\n";
                 return 0;
               })});
  return c;
}

}  // namespace jc::jcctl
