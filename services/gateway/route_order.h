#pragma once

// The order the gateway hands its routes to cpp-httplib, which tries a method's route
// patterns one by one, each a std::regex match (about 1,500 instructions): a create
// (POST /openapi/v1/trainjob, among the last routes of the table) was matched against
// twelve other patterns before its own, 18k instructions a create.

#include <string>
#include <vector>

#include "services/gateway/route.h"

namespace jc::gateway {

// "/openapi/v1/centers/{ai_center_id}" -> "/openapi/v1/centers/([^/]+)": the pattern a
// route's OpenAPI template is served under (matched whole).
std::string PathRegex(const std::string& path);

// Pairs of routes of one method that some path matches both of, as "GET /a/{id} and GET
// /a/stats": a parameter matches one whole segment ([^/]+), so two templates overlap when
// they have as many segments and each segment is the same or a parameter in either (a
// segment holding a parameter beside other text counts as one, conservatively). Empty:
// every path is served by at most one route of its method, whatever order they are tried in.
std::vector<std::string> RoutesMatchingOneAnother(const std::vector<Route>& routes);

// The routes in the order to install them: the busy ones (Route::busy) first, then the
// rest, each group in the table's order. When RoutesMatchingOneAnother finds a pair, the
// table's order itself, which decides then which route serves a path both match.
std::vector<const Route*> InstallOrder(const std::vector<Route>& routes);

}  // namespace jc::gateway
