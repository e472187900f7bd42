// The order the gateway installs its routes in (services/gateway/route_order.h): the busy
// routes are tried first, which changes which patterns a request is matched against
// before its own, never which route serves it.

#include "services/gateway/route_order.h"

#include <catch2/catch.hpp>
#include <regex>

namespace jc::gateway {
namespace {

Route R(const std::string& method, const std::string& path, bool busy = false) {
  Route r;
  r.method = method;
  r.path = path;
  r.busy = busy;
  return r;
}

std::vector<std::string> Installed(const std::vector<Route>& routes) {
  std::vector<std::string> out;
  for (const Route* r : InstallOrder(routes)) out.push_back(r->method + " " + r->path);
  return out;
}

TEST_CASE("the busy routes are installed first, then the rest, each in the table's order [A12]", "[A12]") {
  std::vector<Route> routes = {R("GET", "/openapi/v1/centers/{id}"), R("POST", "/openapi/v1/centers"),
                               R("GET", "/openapi/v1/trainjob/{jobId}", true), R("POST", "/openapi/v1/trainjob", true),
                               R("GET", "/openapi/v1/trainjob")};
  CHECK(Installed(routes) == std::vector<std::string>{"GET /openapi/v1/trainjob/{jobId}", "POST /openapi/v1/trainjob",
                                                      "GET /openapi/v1/centers/{id}", "POST /openapi/v1/centers",
                                                      "GET /openapi/v1/trainjob"});
}

TEST_CASE("routes that a path matches both of are found, and then the table's order is kept [A12]", "[A12]") {
  std::vector<Route> overlapping = {R("GET", "/openapi/v1/trainjob/{jobId}"),
                                    R("GET", "/openapi/v1/trainjob/stats", true),
                                    R("POST", "/openapi/v1/trainjob/stats")};
  auto found = RoutesMatchingOneAnother(overlapping);
  REQUIRE(found.size() == 1);
  CHECK(found[0] == "GET /openapi/v1/trainjob/{jobId} and GET /openapi/v1/trainjob/stats");
  // "stats" would otherwise be served by its own route instead of {jobId}'s.
  CHECK(Installed(overlapping) == std::vector<std::string>{"GET /openapi/v1/trainjob/{jobId}",
                                                           "GET /openapi/v1/trainjob/stats",
                                                           "POST /openapi/v1/trainjob/stats"});
  // Two parameters in different places overlap too; another method, another number of
  // segments, or another literal segment do not.
  CHECK(RoutesMatchingOneAnother({R("GET", "/a/{x}/c"), R("GET", "/a/b/{y}")}).size() == 1);
  CHECK(RoutesMatchingOneAnother({R("GET", "/a/{x}"), R("POST", "/a/b"), R("GET", "/a/b/c"), R("GET", "/a"),
                                  R("GET", "/b/{x}")})
            .empty());
  // The same template twice is found.
  CHECK(RoutesMatchingOneAnother({R("GET", "/a/b"), R("GET", "/a/b")}).size() == 1);
}

TEST_CASE("a route's pattern matches its template's paths whole, a parameter one segment, its special characters "
          "taken literally [A12]",
          "[A12]") {
  const std::regex one(PathRegex("/openapi/v1/centers/{ai_center_id}"));
  CHECK(std::regex_match(std::string("/openapi/v1/centers/alpha"), one));
  CHECK_FALSE(std::regex_match(std::string("/openapi/v1/centers/alpha/extra"), one));
  CHECK_FALSE(std::regex_match(std::string("/openapi/v1/centers/"), one));
  const std::regex dotted(PathRegex("/openapi/v1/openapi.json"));
  CHECK(std::regex_match(std::string("/openapi/v1/openapi.json"), dotted));
  CHECK_FALSE(std::regex_match(std::string("/openapi/v1/openapiXjson"), dotted));
}

}  // namespace
}  // namespace jc::gateway
