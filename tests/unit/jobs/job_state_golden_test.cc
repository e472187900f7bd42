// Golden tests of the job state machine (services/jobs/job_state.h, SPEC A7, C7): each
// file in data/job_state/ holds a job record, a sequence of events (adapter reports,
// submit answers, attempts that could not start, placements the scheduler made, a stop, a scale)
// and, for each event, the job as it stands afterwards with the effects the event asked
// for. The machine has no I/O and takes time as an argument, so the same sequence always
// gives the same lines. Run with JC_UPDATE_GOLDEN=1 to rewrite the expectations after a
// deliberate change (and read the diff).

#include <google/protobuf/util/json_util.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/timestamp.h"
#include "services/jobs/attempt_history.h"
#include "services/jobs/job_state.h"

namespace jc::jobs {
namespace {

using nlohmann::json;

std::string Ref(const AttemptRef& a, bool with_center) {
  return absl::StrCat("t", a.task_index, "r", a.replica_index, "/", a.attempt,
                      with_center ? absl::StrCat("@", a.center_id) : "");
}

// One line: the job's status, each replica (state/attempt@center, and when a service's
// replica starts again), then the effects.
std::string Summary(const v1::JobRecord& job, const JobEffects& fx, absl::Time now) {
  std::vector<std::string> reps;
  for (const auto& r : job.replicas()) {
    reps.push_back(absl::StrCat("t", r.task_index(), "r", r.replica_index(), ":",
                                v1::ReplicaRecord::State_Name(r.state()), "/", r.attempt(), "@",
                                r.center_id().empty() ? "-" : r.center_id()));
    if (r.scaled_away()) absl::StrAppend(&reps.back(), " (scaled away)");
    // Where an attempt could not start: its retries go back there only when nothing else could ever run it.
    if (r.refused_centers_size() > 0) {
      absl::StrAppend(&reps.back(), " (refused at ", absl::StrJoin(r.refused_centers(), ","), ")");
    }
    if (r.state() == v1::ReplicaRecord::WAITING && r.has_restart_after() && FromTimestamp(r.restart_after()) > now) {
      absl::StrAppend(&reps.back(), " (restart ", r.restarts_in_a_row(), " in a row, in ",
                      absl::FormatDuration(FromTimestamp(r.restart_after()) - now), ")");
    }
  }
  std::vector<std::string> effects;
  if (fx.changed) effects.push_back("write");
  for (const auto& a : fx.reported) effects.push_back("reported " + Ref(a, false));
  for (const auto& a : fx.release) effects.push_back("release " + Ref(a, false));
  for (const auto& a : fx.stop) effects.push_back("stop " + Ref(a, true));
  if (fx.wait) effects.push_back("wait");
  if (fx.handed_over) effects.push_back("handed over");
  if (!fx.ended.empty()) effects.push_back("ended " + fx.ended);
  for (const auto& m : fx.metered) {
    const auto& r = job.replicas(m.index);
    effects.push_back(absl::StrCat("meter t", r.task_index(), "r", r.replica_index(), "/", m.attempt.attempt(), "@",
                                   m.attempt.center_id(), " ", m.attempt.outcome(),
                                   m.estimated ? " (estimated)" : "", m.correction ? " (correction)" : "",
                                   m.attempt.transfer_seconds() > 0
                                       ? absl::StrCat(", transfer ", m.attempt.transfer_seconds(), " s")
                                       : ""));
  }
  if ((job.status() == "completed" || job.status() == "failed") && AwaitsUsage(job)) {
    std::vector<std::string> open;
    for (const auto& a : OpenAttempts(job)) open.push_back(Ref(a, true));
    effects.push_back("awaits " + absl::StrJoin(open, " "));
  }
  std::string line = absl::StrCat(job.status(), " | ", absl::StrJoin(reps, " "), " | ",
                                  effects.empty() ? "-" : absl::StrJoin(effects, ", "));
  if (!job.status_reason().empty() && !fx.ended.empty()) absl::StrAppend(&line, " | ", job.status_reason());
  return line;
}

apb::ReplicaState ReportState(const std::string& name) {
  apb::ReplicaState s = apb::REPLICA_STATE_UNSPECIFIED;
  apb::ReplicaState_Parse(name, &s);
  return s;
}

int IndexOf(const v1::JobRecord& job, const json& e) {
  int task = e.value("task", 0), replica = e.value("replica", 0);
  for (int i = 0; i < job.replicas_size(); ++i) {
    if (job.replicas(i).task_index() == task && job.replicas(i).replica_index() == replica) return i;
  }
  FAIL("no replica t" << task << "r" << replica);
  return -1;
}

// Runs one event; returns the summary line after it.
std::string Run(v1::JobRecord& job, const json& e, absl::Time now) {
  JobEffects fx;
  const std::string kind = e.at("event");
  if (kind == "report" || kind == "accepted") {
    int index = IndexOf(job, e);
    apb::Replica report;
    report.mutable_key()->set_job_id(job.job_id());
    report.mutable_key()->set_attempt(e.value("attempt", job.replicas(index).attempt()));
    report.set_state(ReportState(e.at("state")));
    report.set_exit_code(e.value("exit_code", 0));
    report.set_message(e.value("message", ""));
    // Usage as the center measured it: "started" (the center says when it started) and
    // "wall" (seconds it ran).
    if (e.value("started", false)) {
      *report.mutable_started_at() = ToTimestamp(now - absl::Seconds(e.value("started_ago_s", 30)));
    }
    report.mutable_usage()->set_wall_seconds(e.value("wall", 0.0));
    if (kind == "report") {
      // As the job manager does: the attempt's history from the reporting center, then the
      // replica when the center is the one it is recorded at.
      const std::string center = e.value("center", job.replicas(index).center_id());
      ApplyAttemptReport(job, index, center, report, now, &fx);
      if (center == job.replicas(index).center_id()) ApplyReport(job, index, report, now, &fx);
    } else {
      ApplySubmitAccepted(job, index, report, now, &fx);
    }
  } else if (kind == "failed_to_start") {
    ApplyAttemptFailedToStart(job, IndexOf(job, e), e.at("why"), now, &fx);
  } else if (kind == "placed") {
    // What the scheduler and the job manager do when they place a waiting replica.
    auto* rep = job.mutable_replicas(IndexOf(job, e));
    rep->set_state(v1::ReplicaRecord::DISPATCHING);
    rep->set_center_id(e.at("center"));
    NotePlaced(job, IndexOf(job, e), now);
  } else if (kind == "unknown") {
    // The center says it does not know the attempt (asked by key).
    int index = IndexOf(job, e);
    ApplyAttemptUnknown(job, index, e.at("center"), e.value("attempt", job.replicas(index).attempt()), now, &fx);
  } else if (kind == "forgotten") {
    // Its center says it may have forgotten the attempt (GetReplica's FAILED_PRECONDITION),
    // as the job manager applies it.
    int index = IndexOf(job, e);
    ApplyAttemptUnknown(job, index, job.replicas(index).center_id(), job.replicas(index).attempt(), now, &fx,
                        e.at("why"));
    ApplyForgotten(job, index, e.at("why"), now, &fx);
  } else if (kind == "staged") {
    // Its data reached its center (the stager's answer): the transfer took since placed.
    NoteStaged(job, IndexOf(job, e), now);
  } else if (kind == "overdue") {
    // The job manager's poller, `grace_s` after: stopped attempts not reported are closed.
    CloseOverdue(job, now, absl::Seconds(e.at("grace_s").get<int>()), &fx);
  } else if (kind == "stop") {
    ApplyStopRequested(job, now, &fx);
  } else if (kind == "scale") {
    ApplyScale(job, e.value("task", 0), e.at("replicas").get<int>(), now, &fx);
  } else if (kind == "center_lost") {
    // The job manager gave up the replica's center (--center_lost_grace).
    ApplyCenterLost(job, IndexOf(job, e), e.at("why"), now, &fx);
  } else if (kind == "unplaceable") {
    ApplyUnplaceable(job, e.at("why"), now, &fx);
  } else {
    FAIL("unknown event " << kind);
  }
  return Summary(job, fx, now);
}

}  // namespace

TEST_CASE("job state machine: golden event sequences give the expected jobs and effects [A7][C7]", "[A7][C7]") {
  const std::filesystem::path dir = std::filesystem::path(JC_SOURCE_DIR) / "tests/unit/jobs/data/job_state";
  const bool update = std::getenv("JC_UPDATE_GOLDEN") != nullptr;
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    ++files;
    std::ifstream in(entry.path());
    json golden = json::parse(in);
    v1::JobRecord job;
    auto parsed = google::protobuf::util::JsonStringToMessage(golden.at("job").dump(), &job);
    INFO(entry.path().filename().string() << ": " << parsed.ToString());
    REQUIRE(parsed.ok());
    absl::Time now = absl::FromUnixSeconds(1'800'000'000);
    json actual = json::array();
    for (const auto& e : golden.at("events")) {
      now += absl::Seconds(e.value("after_s", 1));  // a second between events, unless it says
      actual.push_back(Run(job, e, now));
    }
    if (update) {
      golden["expect"] = actual;
      std::ofstream(entry.path()) << golden.dump(2) << "\n";
      continue;
    }
    const json& expect = golden.at("expect");
    REQUIRE(expect.size() == actual.size());
    for (size_t i = 0; i < actual.size(); ++i) {
      INFO(entry.path().filename().string() << ", after event " << i << ": " << golden["events"][i].dump());
      CHECK(actual[i].get<std::string>() == expect[i].get<std::string>());
    }
  }
  CHECK(files >= 5);
}

}  // namespace jc::jobs
