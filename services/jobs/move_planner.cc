#include "services/jobs/move_planner.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <iterator>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/timestamp.h"
#include "services/jobs/attempt_history.h"
#include "services/jobs/status_policy.h"

namespace jc::jobs {

namespace {

absl::Time WaitingSince(const v1::ReplicaRecord& rep) {
  return rep.has_dispatched_at() ? FromTimestamp(rep.dispatched_at()) : absl::InfiniteFuture();
}

const v1::AttemptRecord* CurrentAttempt(const v1::ReplicaRecord& rep) {
  for (const auto& a : rep.attempts()) {
    if (a.attempt() == rep.attempt()) return &a;
  }
  return nullptr;
}

// The job of `jobs` (by job id) named `id`; null when it is not there.
v1::JobRecord* FindIn(const std::vector<v1::JobRecord*>& jobs, const std::string& id) {
  auto it = std::lower_bound(jobs.begin(), jobs.end(), id,
                             [](const v1::JobRecord* r, const std::string& key) { return r->job_id() < key; });
  return it != jobs.end() && (*it)->job_id() == id ? *it : nullptr;
}

}  // namespace

MovePass MovePlanner::Weigh(const std::vector<v1::JobRecord*>& jobs, absl::Time now) {
  StartPass([&jobs](const std::string& id) { return FindIn(jobs, id) != nullptr; });
  // Every job in turn from where the last pass stopped (wrapping), so a long run of jobs that
  // stay cannot keep the ones behind them from being weighed.
  auto after_cursor = std::upper_bound(jobs.begin(), jobs.end(), move_cursor_,
                                       [](const std::string& key, const v1::JobRecord* r) { return key < r->job_id(); });
  std::vector<v1::JobRecord*> order(after_cursor, jobs.end());
  order.insert(order.end(), jobs.begin(), after_cursor);
  return WeighSlice(order, now);
}

void MovePlanner::StartPass(const std::function<bool(const std::string&)>& present) {
  // What is kept of jobs that left memory goes with them.
  for (auto it = move_checked_.begin(); it != move_checked_.end();) {
    it = present(it->first.first) ? std::next(it) : move_checked_.erase(it);
  }
  for (auto it = unwithdrawable_.begin(); it != unwithdrawable_.end();) {
    it = present(std::get<0>(*it)) ? std::next(it) : unwithdrawable_.erase(it);
  }
  questions_left_ = kMaxQuestions;
}

MovePass MovePlanner::WeighSlice(const std::vector<v1::JobRecord*>& slice, absl::Time now) {
  MovePass pass;
  // In the order given: the caller's walk starts after the cursor and goes round to it.
  for (v1::JobRecord* job : slice) {
    v1::JobRecord& r = *job;
    const std::string& id = r.job_id();
    if (r.stop_requested() || r.status() == kCompleted || r.status() == kFailed) continue;
    // Asks written earlier and not answered (lost, or before a restart) go again.
    for (int i = 0; i < r.replicas_size(); ++i) {
      const auto& rep = r.replicas(i);
      const v1::AttemptRecord* a = CurrentAttempt(rep);
      if (rep.state() != v1::ReplicaRecord::PENDING || a == nullptr || !a->has_withdraw_asked_at() || a->closed() ||
          withdrawing_.count({id, i}) || unwithdrawable_.count({id, i, rep.attempt()}) || !MaySend(rep.center_id())) {
        continue;
      }
      auto& checked = move_checked_[{id, i}];
      if (now - checked < kAskAgain) continue;
      checked = now;
      Withdrawal w{id, i, rep.attempt(), rep.center_id(), ReplicaKeyOf(r, i)};
      Reserve(w);
      pass.resend.push_back(std::move(w));
    }
    if (pass.questions.size() >= questions_left_) continue;
    move_cursor_ = id;
    // Candidates: replicas waiting at their center past move_after, never asked, with moves
    // left. A gang only whole: every replica of it waits at one center.
    const bool gang = r.request().scheduling().gang();
    std::vector<int> candidates;
    std::string center;
    absl::Time since = absl::InfinitePast();
    bool whole = true;
    for (int i = 0; i < r.replicas_size(); ++i) {
      const auto& rep = r.replicas(i);
      const v1::AttemptRecord* a = CurrentAttempt(rep);
      const bool movable = rep.state() == v1::ReplicaRecord::PENDING && a != nullptr && !a->has_withdraw_asked_at() &&
                           !a->has_started_at() && rep.moves() < options_.max_moves &&
                           now - WaitingSince(rep) >= options_.move_after &&
                           !unwithdrawable_.count({id, i, rep.attempt()});
      if (!movable) {
        if (!Ended(rep.state())) whole = false;
        continue;
      }
      if (gang && !center.empty() && rep.center_id() != center) whole = false;
      center = rep.center_id();
      since = std::max(since, WaitingSince(rep));
      candidates.push_back(i);
    }
    if (gang && !whole) continue;
    for (size_t k = 0; k < candidates.size(); ++k) {
      std::vector<int> group = gang ? candidates : std::vector<int>{candidates[k]};
      auto& checked = move_checked_[{id, group.front()}];
      if (now - checked < kRecheck) {
        if (gang) break;
        continue;
      }
      checked = now;
      scheduler::Scheduler::MoveQuestion q;
      q.job_id = id;
      q.job = &r.request();
      const auto& first = r.replicas(group.front());
      q.from = first.center_id();
      q.waited = now - (gang ? since : WaitingSince(first));
      for (int i : group) {
        const auto& rep = r.replicas(i);
        // Never to a center that refused it (the placement after the withdrawal would not send it there).
        q.slots.push_back({rep.task_index(), rep.replica_index(), rep.attempt() + 1, {}, HeldRefusals(rep, now)});
      }
      pass.questions.push_back(std::move(q));
      pass.indices.push_back(std::move(group));
      if (gang || pass.questions.size() >= questions_left_) break;
    }
  }
  questions_left_ -= std::min(questions_left_, pass.questions.size());
  return pass;
}

std::vector<MoveAsk> MovePlanner::Ask(const MovePass& pass, const std::vector<scheduler::Scheduler::MoveAnswer>& answers,
                                      const std::vector<v1::JobRecord*>& jobs, absl::Time now) {
  std::vector<MoveAsk> asks;
  for (size_t n = 0; n < answers.size() && n < pass.questions.size(); ++n) {
    if (answers[n].to.empty()) continue;
    v1::JobRecord* r = FindIn(jobs, pass.questions[n].job_id);
    if (r == nullptr) continue;
    // One withdrawal in flight per center: another waits for the next pass.
    if (!MaySend(pass.questions[n].from)) continue;
    MoveAsk ask;
    ask.job_id = r->job_id();
    ask.why = absl::StrCat(answers[n].why, ": moving it to ", answers[n].to);
    JobEffects fx;
    std::vector<Withdrawal> asked;
    for (int i : pass.indices[n]) {
      if (!AskWithdraw(*r, i, ask.why, now, &fx)) continue;
      asked.push_back({r->job_id(), i, r->replicas(i).attempt(), r->replicas(i).center_id(), ReplicaKeyOf(*r, i)});
    }
    // A gang is one job of its center's scheduler: one withdrawal takes all of it back (the
    // others' asks are written, so their reports count as withdrawn too).
    if (!asked.empty()) {
      Reserve(asked.front());
      ask.send.push_back(std::move(asked.front()));
    }
    ask.changed = fx.changed;
    if (ask.changed || !ask.send.empty()) asks.push_back(std::move(ask));
  }
  return asks;
}

const char* MovePlanner::Answered(const Withdrawal& w, v1::JobRecord* r, const absl::StatusOr<apb::Replica>& answer,
                                  absl::Time now, JobEffects* fx) {
  withdrawing_.erase({w.job_id, w.index});
  withdrawing_at_.erase(w.center);
  if (r == nullptr) return nullptr;
  if (!answer.ok()) {
    // A center that cannot withdraw (or refuses for good) keeps the replica: never asked
    // again for this attempt. Anything else is asked again.
    const auto code = answer.status().code();
    if (code == absl::StatusCode::kUnimplemented || code == absl::StatusCode::kFailedPrecondition ||
        code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kNotFound) {
      unwithdrawable_.insert({w.job_id, w.index, w.attempt});
      auto* rep = r->mutable_replicas(w.index);
      if (rep->attempt() == w.attempt && absl::StartsWith(rep->message(), "moving: ")) {
        rep->set_message(absl::StrCat("not moved: ", w.center, " cannot take it back (", answer.status().message(), ")"));
        fx->changed = true;
      }
      return "refused";
    }
    return "error";
  }
  const auto& rep = r->replicas(w.index);
  const bool current = rep.attempt() == w.attempt && rep.center_id() == w.center;
  ApplyAttemptReport(*r, w.index, w.center, *answer, now, fx);
  if (current) ApplyReport(*r, w.index, *answer, now, fx);
  if (answer->withdrawn()) return "withdrawn";
  unwithdrawable_.insert({w.job_id, w.index, w.attempt});
  // It stays: its message says so instead of "moving: …".
  auto* stays = r->mutable_replicas(w.index);
  if (stays->attempt() == w.attempt && absl::StartsWith(stays->message(), "moving: ")) {
    stays->set_message(absl::StrCat("not moved: it started at ", w.center, " first"));
    fx->changed = true;
  }
  return "started";
}

void MovePlanner::BeginPass() {
  if (options_.max_moves <= 0) return;
  StartPass([this](const std::string& id) { return host_->Find(id) != nullptr; });
}

void MovePlanner::ConsiderSlice(const std::vector<v1::JobRecord*>& slice, absl::Time now) {
  if (options_.max_moves <= 0) return;
  MovePass pass = WeighSlice(slice, now);
  for (const Withdrawal& w : pass.resend) host_->Send(w);
  if (pass.questions.empty()) return;
  std::vector<scheduler::Scheduler::MoveAnswer> answers = host_->MoveTargets(pass.questions, options_.move_margin);
  for (const MoveAsk& ask : Ask(pass, answers, slice, now)) {
    for (const Withdrawal& w : ask.send) host_->Send(w);
    if (ask.changed) {
      spdlog::info("job manager: job {}: {}", ask.job_id, ask.why);
      JobEffects fx;  // an ask only changes the record: nothing else follows from it
      fx.changed = true;
      host_->Apply(ask.job_id, fx);
    }
  }
}

void MovePlanner::OnWithdrawAnswer(const Withdrawal& w, const absl::StatusOr<apb::Replica>& answer, absl::Time now) {
  v1::JobRecord* r = host_->Find(w.job_id);
  JobEffects fx;
  const char* result = Answered(w, r, answer, now, &fx);
  if (r == nullptr) return;  // the job left: nothing to count it against
  if (!answer.ok()) {
    spdlog::info("job manager: center {} did not withdraw replica {}/{} of {}: {}", w.center, w.key.task_index(),
                 w.key.replica_index(), w.job_id, answer.status().ToString());
  }
  // A refusal only rewrote the message; an answer is applied as the state machine said.
  if (answer.ok() || fx.changed) host_->Apply(w.job_id, fx);
  if (metrics_ != nullptr) metrics_->withdrawals->Add({{"center", w.center}, {"result", result}}).Increment();
}

}  // namespace jc::jobs
