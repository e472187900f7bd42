// The move planner's decisions (SPEC A16, issue 45), without a scheduler or a center: which
// waiting replicas a pass weighs (past move_after, moves left, a gang whole), when one is
// weighed again, that passes take turns from a cursor when there are more candidates than
// a pass asks about, one withdrawal in flight per center, and what a center's answer
// leaves behind (a refusal or a start: never asked again; no answer: asked again).

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "services/jobs/attempt_history.h"
#include "services/jobs/job_state.h"
#include "services/jobs/move_planner.h"
#include "tests/unit/jobs/pending_job.h"

namespace {

namespace v1 = ::jointcloud::v1;
namespace apb = ::jointcloud::adapter::v1;
using jc::jobs::JobEffects;
using jc::jobs::MoveAsk;
using jc::jobs::MovePass;
using jc::jobs::MovePlanner;
using jc::jobs::Withdrawal;
using Answer = jc::scheduler::Scheduler::MoveAnswer;

const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);

jc::jobs::MoveOptions Options() {
  jc::jobs::MoveOptions o;
  o.max_moves = 2;
  o.move_after = absl::Minutes(2);
  o.move_margin = 0.25;
  return o;
}

// A job of `replicas` replicas of one task, each acknowledged as pending at `center` at `at`.
v1::JobRecord PendingJob(const std::string& id, int replicas, const std::string& center, bool gang = false,
                         absl::Time at = kT0) {
  return jc::jobs::testing::PendingJob(replicas, center, {.job_id = id, .gang = gang, .at = at});
}

// The jobs as the job manager hands them to a pass: by job id.
struct Jobs {
  std::map<std::string, v1::JobRecord> by_id;
  void Add(v1::JobRecord r) { by_id[r.job_id()] = std::move(r); }
  std::vector<v1::JobRecord*> All() {
    std::vector<v1::JobRecord*> out;
    for (auto& [id, r] : by_id) out.push_back(&r);
    return out;
  }
};

// One job of one replica pending at its center for each (job id, center), as of kT0.
Jobs PendingAt(std::initializer_list<std::pair<const char*, const char*>> jobs_at) {
  Jobs jobs;
  for (const auto& [id, center] : jobs_at) jobs.Add(PendingJob(id, 1, center));
  return jobs;
}

std::vector<std::string> QuestionJobs(const MovePass& pass) {
  std::vector<std::string> ids;
  for (const auto& q : pass.questions) ids.push_back(q.job_id);
  return ids;
}

// Every question answered "move it to `to`".
std::vector<Answer> MoveAllTo(const MovePass& pass, const std::string& to) {
  return std::vector<Answer>(pass.questions.size(), Answer{to, "b starts it now"});
}

}  // namespace

TEST_CASE("a pass weighs the replicas that waited at their center past move_after and have moves left [A16]", "[A16]") {
  MovePlanner planner(nullptr, Options());
  Jobs jobs;
  jobs.Add(PendingJob("early", 1, "a", false, kT0 + absl::Minutes(1)));  // waited 1m only
  jobs.Add(PendingJob("waited", 1, "a"));
  v1::JobRecord spent = PendingJob("spent", 1, "a");
  spent.mutable_replicas(0)->set_moves(2);  // max_moves used up
  jobs.Add(spent);
  v1::JobRecord running = PendingJob("running", 1, "a");
  running.mutable_replicas(0)->set_state(v1::ReplicaRecord::RUNNING);
  jobs.Add(running);
  v1::JobRecord stopping = PendingJob("stopping", 1, "a");
  stopping.set_stop_requested(true);
  jobs.Add(stopping);

  MovePass pass = planner.Weigh(jobs.All(), kT0 + absl::Minutes(2));
  REQUIRE(QuestionJobs(pass) == std::vector<std::string>{"waited"});
  CHECK(pass.questions[0].from == "a");
  CHECK(pass.questions[0].waited == absl::Minutes(2));
  REQUIRE(pass.questions[0].slots.size() == 1);
  CHECK(pass.questions[0].slots[0].attempt == 1);  // placed again as a new attempt
  CHECK(pass.indices == std::vector<std::vector<int>>{{0}});
  CHECK(pass.resend.empty());
}

TEST_CASE("a replica weighed and left is weighed again only after kRecheck [A16]", "[A16]") {
  MovePlanner planner(nullptr, Options());
  Jobs jobs;
  jobs.Add(PendingJob("j", 1, "a"));
  const absl::Time t = kT0 + absl::Minutes(3);
  CHECK(planner.Weigh(jobs.All(), t).questions.size() == 1);
  CHECK(planner.Weigh(jobs.All(), t + absl::Seconds(1)).questions.empty());
  CHECK(planner.Weigh(jobs.All(), t + MovePlanner::kRecheck).questions.size() == 1);
}

TEST_CASE("passes take turns from where the last one stopped: more candidates than a pass asks about are all "
          "weighed in turn [A16]",
          "[A16]") {
  MovePlanner planner(nullptr, Options());
  Jobs jobs;
  const size_t n = MovePlanner::kMaxQuestions + 8;
  for (size_t i = 0; i < n; ++i) jobs.Add(PendingJob(absl::StrFormat("job-%03d", i), 1, "a"));
  const absl::Time t = kT0 + absl::Minutes(3);
  MovePass first = planner.Weigh(jobs.All(), t);
  REQUIRE(first.questions.size() == MovePlanner::kMaxQuestions);
  CHECK(first.questions.front().job_id == "job-000");
  CHECK(first.questions.back().job_id == "job-031");
  // A second later: the ones behind the cursor, then the first ones are not due yet.
  MovePass second = planner.Weigh(jobs.All(), t + absl::Seconds(1));
  REQUIRE(second.questions.size() == 8);
  CHECK(second.questions.front().job_id == "job-032");
  CHECK(second.questions.back().job_id == "job-039");
  // Due again: the pass starts after the last job it weighed, wrapping round.
  MovePass third = planner.Weigh(jobs.All(), t + MovePlanner::kRecheck);
  REQUIRE(third.questions.size() == MovePlanner::kMaxQuestions);
  CHECK(third.questions.front().job_id == "job-000");
}

// A pass as the job manager's loop takes it: a slice of `slice` jobs at a time, from the
// first after the planner's cursor round to it (JobManager::ContinueSweep).
MovePass SlicedPass(MovePlanner& planner, Jobs& jobs, size_t slice, absl::Time now) {
  planner.StartPass([&jobs](const std::string& id) { return jobs.by_id.count(id) > 0; });
  const std::string from = planner.cursor();
  std::vector<v1::JobRecord*> order;
  for (auto it = jobs.by_id.upper_bound(from); it != jobs.by_id.end(); ++it) order.push_back(&it->second);
  for (auto it = jobs.by_id.begin(); it != jobs.by_id.end() && it->first <= from; ++it) order.push_back(&it->second);
  MovePass all;
  for (size_t k = 0; k < order.size(); k += slice) {
    std::vector<v1::JobRecord*> part(order.begin() + static_cast<std::ptrdiff_t>(k),
                                     order.begin() + static_cast<std::ptrdiff_t>(std::min(order.size(), k + slice)));
    MovePass p = planner.WeighSlice(part, now);
    all.questions.insert(all.questions.end(), p.questions.begin(), p.questions.end());
    all.resend.insert(all.resend.end(), p.resend.begin(), p.resend.end());
  }
  return all;
}

TEST_CASE("a pass taken a few jobs at a time, as the job manager's loop walks them, asks what one pass over every "
          "job asks, in the same turns [A16]",
          "[A16]") {
  const size_t n = MovePlanner::kMaxQuestions + 8;
  Jobs jobs;
  for (size_t i = 0; i < n; ++i) jobs.Add(PendingJob(absl::StrFormat("job-%03d", i), 1, "a"));
  MovePlanner whole(nullptr, Options()), sliced(nullptr, Options());
  const absl::Time t = kT0 + absl::Minutes(3);
  for (absl::Time at : {t, t + absl::Seconds(1), t + MovePlanner::kRecheck, t + 2 * MovePlanner::kRecheck}) {
    INFO("at " << absl::FormatDuration(at - t));
    const std::vector<std::string> expected = QuestionJobs(whole.Weigh(jobs.All(), at));
    CHECK(QuestionJobs(SlicedPass(sliced, jobs, 5, at)) == expected);
    CHECK(sliced.cursor() == whole.cursor());
  }
  // The pass asks kMaxQuestions in all, not per slice.
  MovePlanner fresh(nullptr, Options());
  CHECK(SlicedPass(fresh, jobs, 3, t).questions.size() == MovePlanner::kMaxQuestions);
}

TEST_CASE("an answer that names a target records the ask on the replica and sends one withdrawal per center: a "
          "second replica at the same center waits for the next pass [A16]",
          "[A16]") {
  MovePlanner planner(nullptr, Options());
  Jobs jobs = PendingAt({{"j1", "a"}, {"j2", "a"}, {"j3", "c"}, {"stays", "d"}});
  const absl::Time t = kT0 + absl::Minutes(3);
  MovePass pass = planner.Weigh(jobs.All(), t);
  REQUIRE(pass.questions.size() == 4);
  std::vector<Answer> answers = MoveAllTo(pass, "b");
  answers[3] = Answer{"", "d starts it as soon"};
  std::vector<MoveAsk> asks = planner.Ask(pass, answers, jobs.All(), t);
  REQUIRE(asks.size() == 2);
  CHECK(asks[0].job_id == "j1");
  CHECK(asks[0].changed);
  CHECK(asks[0].why == "b starts it now: moving it to b");
  REQUIRE(asks[0].send.size() == 1);
  CHECK(asks[0].send[0].center == "a");
  CHECK(asks[0].send[0].key.job_id() == "j1");
  CHECK(asks[1].job_id == "j3");
  const auto& rep = jobs.by_id["j1"].replicas(0);
  CHECK(rep.message() == "moving: b starts it now: moving it to b");
  CHECK(rep.attempts(0).has_withdraw_asked_at());
  CHECK_FALSE(jobs.by_id["j2"].replicas(0).attempts(0).has_withdraw_asked_at());
  CHECK(planner.Withdrawing("j1", 0));
  CHECK_FALSE(planner.MaySend("a"));
  CHECK(planner.MaySend("d"));
}

TEST_CASE("no more than kMaxInFlight withdrawals are under way at once [A16]", "[A16]") {
  MovePlanner planner(nullptr, Options());
  Jobs jobs;
  for (int i = 0; i < 6; ++i) jobs.Add(PendingJob(absl::StrCat("j", i), 1, absl::StrCat("center-", i)));
  const absl::Time t = kT0 + absl::Minutes(3);
  MovePass pass = planner.Weigh(jobs.All(), t);
  REQUIRE(pass.questions.size() == 6);
  std::vector<MoveAsk> asks = planner.Ask(pass, MoveAllTo(pass, "b"), jobs.All(), t);
  CHECK(asks.size() == MovePlanner::kMaxInFlight);
}

TEST_CASE("a gang is weighed whole, asked back whole, and withdrawn by one ask [A16][A8]", "[A16][A8]") {
  MovePlanner planner(nullptr, Options());
  Jobs jobs;
  jobs.Add(PendingJob("gang", 3, "a", /*gang=*/true));
  v1::JobRecord split = PendingJob("split", 2, "a", /*gang=*/true);
  split.mutable_replicas(1)->set_state(v1::ReplicaRecord::RUNNING);  // not whole: it stays
  jobs.Add(split);
  const absl::Time t = kT0 + absl::Minutes(3);
  MovePass pass = planner.Weigh(jobs.All(), t);
  REQUIRE(QuestionJobs(pass) == std::vector<std::string>{"gang"});
  CHECK(pass.questions[0].slots.size() == 3);
  CHECK(pass.indices[0] == std::vector<int>{0, 1, 2});
  std::vector<MoveAsk> asks = planner.Ask(pass, MoveAllTo(pass, "b"), jobs.All(), t);
  REQUIRE(asks.size() == 1);
  CHECK(asks[0].send.size() == 1);
  for (const auto& rep : jobs.by_id["gang"].replicas()) CHECK(rep.attempts(0).has_withdraw_asked_at());
}

TEST_CASE("a center's answer: withdrawn places the replica again, a start or a refusal keeps it there for good, "
          "a passing error is asked again after kAskAgain [A16]",
          "[A16]") {
  MovePlanner planner(nullptr, Options());
  Jobs jobs = PendingAt({{"moved", "a"}, {"started", "b"}, {"refused", "c"}, {"lost", "d"}});
  const absl::Time t = kT0 + absl::Minutes(3);
  MovePass pass = planner.Weigh(jobs.All(), t);
  std::vector<MoveAsk> asks = planner.Ask(pass, MoveAllTo(pass, "e"), jobs.All(), t);
  REQUIRE(asks.size() == 4);
  std::map<std::string, Withdrawal> sent;
  for (const auto& a : asks) sent[a.job_id] = a.send.at(0);

  apb::Replica withdrawn;
  *withdrawn.mutable_key() = sent["moved"].key;
  withdrawn.set_state(apb::REPLICA_STOPPED);
  withdrawn.set_withdrawn(true);
  JobEffects fx;
  CHECK(std::string(planner.Answered(sent["moved"], &jobs.by_id["moved"], withdrawn, t, &fx)) == "withdrawn");
  CHECK(fx.wait);
  CHECK(jobs.by_id["moved"].replicas(0).state() == v1::ReplicaRecord::WAITING);
  CHECK(jobs.by_id["moved"].replicas(0).moves() == 1);

  apb::Replica running;
  *running.mutable_key() = sent["started"].key;
  running.set_state(apb::REPLICA_RUNNING);
  fx = JobEffects();
  CHECK(std::string(planner.Answered(sent["started"], &jobs.by_id["started"], running, t, &fx)) == "started");
  CHECK(planner.Unwithdrawable("started", 0, 0));
  CHECK(jobs.by_id["started"].replicas(0).message() == "not moved: it started at b first");

  fx = JobEffects();
  CHECK(std::string(planner.Answered(sent["refused"], &jobs.by_id["refused"],
                                     absl::UnimplementedError("no withdrawals here"), t, &fx)) == "refused");
  CHECK(fx.changed);
  CHECK(planner.Unwithdrawable("refused", 0, 0));
  CHECK(jobs.by_id["refused"].replicas(0).message() == "not moved: c cannot take it back (no withdrawals here)");

  fx = JobEffects();
  CHECK(std::string(planner.Answered(sent["lost"], &jobs.by_id["lost"], absl::UnavailableError("timeout"), t, &fx)) ==
        "error");
  CHECK_FALSE(fx.changed);
  CHECK_FALSE(planner.Unwithdrawable("lost", 0, 0));
  CHECK(planner.MaySend("d"));
  // The ask is written and not answered: sent again once kAskAgain passed, never before.
  CHECK(planner.Weigh(jobs.All(), t + absl::Seconds(1)).resend.empty());
  MovePass later = planner.Weigh(jobs.All(), t + MovePlanner::kAskAgain);
  REQUIRE(later.resend.size() == 1);
  CHECK(later.resend[0].job_id == "lost");
  CHECK(later.resend[0].center == "d");
  CHECK(later.questions.empty());  // the others are asked, moved, or stay for good
}

TEST_CASE("a new term forgets the withdrawals in flight: their asks are sent again [A16]", "[A16]") {
  MovePlanner planner(nullptr, Options());
  Jobs jobs;
  jobs.Add(PendingJob("j", 1, "a"));
  const absl::Time t = kT0 + absl::Minutes(3);
  MovePass pass = planner.Weigh(jobs.All(), t);
  REQUIRE(planner.Ask(pass, MoveAllTo(pass, "b"), jobs.All(), t).size() == 1);
  CHECK(planner.Weigh(jobs.All(), t + MovePlanner::kAskAgain).resend.empty());  // in flight
  planner.Reset();
  CHECK(planner.Weigh(jobs.All(), t + MovePlanner::kAskAgain).resend.size() == 1);
}
