// The one-shot answer the job manager's loop gives a waiting create, stop or scale
// (common/one_shot.h): answered across threads, abandoned when the loop drops it, and a wait
// bounded by its deadline (SPEC A11: a create is acknowledged only by its answer; C7: a
// stopped loop leaves no caller waiting for ever).

#include <catch2/catch.hpp>
#include <string>
#include <thread>

#include "common/event_loop.h"
#include "common/one_shot.h"

TEST_CASE("a reply sent on the loop reaches the thread waiting for it, once [A11]", "[A11]") {
  jc::EventLoop loop;
  loop.Start("reply-test");
  auto reply = std::make_shared<jc::OneShot<std::string>>();
  jc::OneShot<std::string>::Answer answer = reply->Await();
  loop.Post([reply] {
    reply->Send("created");
    reply->Send("again");  // the first answer counts
  });
  reply.reset();  // only the loop's closure holds it now
  REQUIRE(answer.WaitFor(absl::Seconds(30)));
  CHECK(answer.Take() == std::optional<std::string>("created"));
  loop.Stop();
}

TEST_CASE("a reply the loop drops unsent wakes its waiter as abandoned, and an unanswered wait ends at its "
          "deadline [C7]",
          "[C7]") {
  SECTION("dropped") {
    jc::EventLoop loop;
    auto reply = std::make_shared<jc::OneShot<int>>();
    auto answer = reply->Await();
    loop.Post([reply] { reply->Send(1); });  // never runs: the loop is not started
    reply.reset();
    std::thread stopper([&] { loop.Stop(); });  // drops the queued closure, and the reply with it
    REQUIRE(answer.WaitFor(absl::Seconds(30)));
    CHECK_FALSE(answer.Take().has_value());
    stopper.join();
  }
  SECTION("never answered") {
    auto reply = std::make_shared<jc::OneShot<int>>();
    auto answer = reply->Await();
    CHECK_FALSE(answer.WaitFor(absl::Milliseconds(20)));  // still held, unsent: not settled
    CHECK_FALSE(answer.Take().has_value());
    reply->Send(7);
    CHECK(answer.WaitFor(absl::ZeroDuration()));
    CHECK(answer.Take() == std::optional<int>(7));
  }
}
