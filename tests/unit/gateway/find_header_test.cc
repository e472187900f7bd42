// FindHeader (services/gateway/rest_call.h): a header's first value, its name in any case,
// as httplib's own look-up finds it (the gateway reads a request's credentials, its id and
// its idempotency key through it).

#include <catch2/catch.hpp>

#include "services/gateway/rest_call.h"

namespace jc::gateway {
namespace {

TEST_CASE("a header is found whatever the case of its name, its first value when sent twice, and nothing for "
          "a name only like it [A12]",
          "[A12]") {
  httplib::Request req;
  req.headers.emplace("authorization", "Bearer one");
  req.headers.emplace("X-REQUEST-ID", "r-1");
  req.headers.emplace("Authorization", "Bearer two");
  req.headers.emplace("Content-Type", "application/json");
  req.headers.emplace("Idempotency-Keys", "not it");
  for (const char* name : {"Authorization", "AUTHORIZATION", "authorization"}) {
    const std::string* found = FindHeader(req, name);
    REQUIRE(found != nullptr);
    CHECK(*found == "Bearer one");  // the first sent
    CHECK(*found == req.get_header_value(name));  // as httplib finds it
  }
  REQUIRE(FindHeader(req, "x-request-id") != nullptr);
  CHECK(*FindHeader(req, "x-request-id") == "r-1");
  CHECK(FindHeader(req, "Idempotency-Key") == nullptr);
  CHECK(FindHeader(req, "Content-Typ") == nullptr);
  CHECK(FindHeader(req, "") == nullptr);
  CHECK(FindHeader(httplib::Request{}, "Authorization") == nullptr);
}

}  // namespace
}  // namespace jc::gateway
