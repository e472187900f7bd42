#pragma once

// The one place where an absl::Status becomes the REST envelope of the standard's
// Appendix A: {"status": <int>, "code": <string>, "errorMsg": <string>, "data": ...}.

#include <string>

#include "absl/status/status.h"

namespace jc {

// HTTP status code that carries `code` (INVALID_ARGUMENT -> 400, NOT_FOUND -> 404, ...).
int HttpStatusFor(absl::StatusCode code);

// The envelope for `status` with `data_json` (already serialized JSON; "null" or empty
// for none). `status` is the HTTP status, `code` the canonical code name ("OK",
// "NOT_FOUND", ...), `errorMsg` the message ("" on success).
std::string MakeEnvelope(const absl::Status& status, const std::string& data_json);

// The canonical name of `code` as both APIs spell it ("NOT_FOUND", "PERMISSION_DENIED").
std::string StatusCodeName(absl::StatusCode code);

// Same, for HTTP-level failures that have no absl::Status (e.g. 413 from the server).
std::string MakeHttpErrorEnvelope(int http_status, const std::string& message);

}  // namespace jc
