#pragma once

// A one-shot answer from an event loop to the thread that waits for it: std::promise's job
// on the job path, without its system call. libstdc++'s promise stores its value under
// std::call_once, and glibc's pthread_once ends every first call with a futex wake whether
// or not anyone waits: one wasted system call per answer, on the job manager's loop, which
// every create passes through (issue 48: half of that thread's futex calls, counted with
// `perf record -e syscalls:sys_enter_futex`). Here the answer is set under an absl::Mutex,
// whose unlock wakes the waiter, and makes no call when nobody waits.
//
//   auto reply = std::make_shared<OneShot<int>>();
//   OneShot<int>::Answer answer = reply->Await();
//   loop.Post([reply] { reply->Send(42); });
//   if (answer.WaitFor(absl::Seconds(30))) std::optional<int> got = answer.Take();
//
// One destroyed unsent (its loop stopped and dropped the closures that held it) is
// abandoned: the waiter wakes and Take gives nullopt, as a broken promise did.

#include <memory>
#include <optional>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace jc {

template <typename T>
class OneShot {
  struct State {
    absl::Mutex mu;
    std::optional<T> value ABSL_GUARDED_BY(mu);
    bool abandoned ABSL_GUARDED_BY(mu) = false;
    bool sent ABSL_GUARDED_BY(mu) = false;  // Take empties `value`, not what was sent
    bool Settled() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return value.has_value() || abandoned; }
  };

 public:
  // The waiting side.
  class Answer {
   public:
    // Whether the answer came (or the reply was abandoned) within `wait`.
    bool WaitFor(absl::Duration wait) {
      absl::MutexLock lock(&state_->mu);
      return state_->mu.AwaitWithTimeout(absl::Condition(state_.get(), &State::Settled), wait);
    }
    // The answer once settled; nullopt when abandoned (or not answered yet). Once.
    std::optional<T> Take() {
      absl::MutexLock lock(&state_->mu);
      std::optional<T> out = std::move(state_->value);
      state_->value.reset();
      return out;
    }

   private:
    friend class OneShot;
    explicit Answer(std::shared_ptr<State> state) : state_(std::move(state)) {}
    std::shared_ptr<State> state_;
  };

  OneShot() : state_(std::make_shared<State>()) {}
  OneShot(const OneShot&) = delete;
  OneShot& operator=(const OneShot&) = delete;
  ~OneShot() {
    absl::MutexLock lock(&state_->mu);
    if (!state_->sent) state_->abandoned = true;
  }

  Answer Await() const { return Answer(state_); }

  // The first answer counts; a later one is ignored (a promise threw).
  void Send(T value) {
    absl::MutexLock lock(&state_->mu);
    if (state_->sent) return;
    state_->value.emplace(std::move(value));
    state_->sent = true;
  }

 private:
  std::shared_ptr<State> state_;
};

}  // namespace jc
