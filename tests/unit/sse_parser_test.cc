// The one Server-Sent Events parser (common/sse_parser.h) that jcctl and the tests read
// the job event streams with: events split anywhere across reads, CRLF, several data
// lines, comments, and stopping.

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "common/sse_parser.h"

TEST_CASE("SSE: events come whole however the bytes are split, with ids, types, joined data and comments [C8]",
          "[C8]") {
  const std::string stream =
      ": connected\r\n\r\nretry: 2000\n\nid: 7\nevent: created\ndata: {\"a\":1}\n\n"
      "id:8\r\nevent: updated\r\ndata: line one\r\ndata:line two\r\n\r\n"
      "event: no-data\n\ndata: plain\n\n";
  for (size_t piece = 1; piece <= stream.size(); ++piece) {
    INFO("pieces of " << piece);
    jc::SseParser parser;
    std::vector<jc::SseEvent> events;
    int comments = 0;
    for (size_t at = 0; at < stream.size(); at += piece) {
      REQUIRE(parser.Feed(
          std::string_view(stream).substr(at, piece),
          [&](const jc::SseEvent& e) {
            events.push_back(e);
            return true;
          },
          [&](std::string_view text) {
            CHECK(text == " connected");
            ++comments;
          }));
    }
    CHECK(comments == 1);
    REQUIRE(events.size() == 3);  // the retry hint and an event without data are not events
    CHECK(events[0].id == "7");
    CHECK(events[0].event == "created");
    CHECK(events[0].data == "{\"a\":1}");
    CHECK(events[1].id == "8");
    CHECK(events[1].event == "updated");
    CHECK(events[1].data == "line one\nline two");
    CHECK(events[2].event == "message");
    CHECK(events[2].data == "plain");
  }
}

TEST_CASE("SSE: a handler that says stop stops the feed there [C8]", "[C8]") {
  jc::SseParser parser;
  int seen = 0;
  bool more = parser.Feed("data: 1\n\ndata: 2\n\n", [&](const jc::SseEvent&) { return ++seen < 1; },
                          [](std::string_view) {});
  CHECK_FALSE(more);
  CHECK(seen == 1);
}
