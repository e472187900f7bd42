#pragma once

// Field checks shared by every service, each returning InvalidArgument with a message
// that names the field, so a client can fix its request without reading the code.

#include "absl/strings/string_view.h"
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace google::protobuf {
class Message;
}

namespace jc {

// The standard bounds ids and names at "less than 64 bytes".
inline constexpr size_t kMaxShortField = 63;

// A required identifier: 1..63 bytes of [A-Za-z0-9._-], since ids appear in URL paths,
// and never "." or "..", since ids become file and directory names at centers.
absl::Status CheckId(absl::string_view field, absl::string_view value);
// A name that becomes one path component (a dataset name or version, a replica or log
// file name): not empty, not "." or "..", no '/' and no NUL.
absl::Status CheckPathComponent(absl::string_view field, absl::string_view value);
// A required text field of 1..max_bytes bytes.
absl::Status CheckRequiredText(absl::string_view field, absl::string_view value,
                               size_t max_bytes = kMaxShortField);
// An optional text field of at most max_bytes bytes.
absl::Status CheckOptionalText(absl::string_view field, absl::string_view value,
                               size_t max_bytes = kMaxShortField);

// A replica's named port (SPEC A17), wherever it enters (a task's ports, an adapter's
// submit): `where` names the field ("tasks[0].ports[1]"). The name [a-z][a-z0-9-]*, at most
// 15 bytes (it becomes JC_PORT_<NAME> and part of an endpoint's host name); the port 0 (the
// center chooses) or 1..65535; the readiness path empty or '/' then printable ASCII without
// spaces, at most 256 bytes (it goes into an HTTP request line).
absl::Status CheckPort(absl::string_view where, absl::string_view name, int port, absl::string_view readiness_path);
// Every google.protobuf.Timestamp set in `message`, at any depth: seconds within 0001-01-01
// to 9999-12-31 and nanos 0..999,999,999, as protobuf's JSON printer needs them. A time
// outside ("9999-12-31T23:59:59-01:00", {"seconds": 2^63-1}) parses, is stored, and then
// every list holding it answers 500 (helper-47 F2). The field is named as the JSON body
// names it ("scheduling.deadline").
absl::Status CheckTimestamps(const google::protobuf::Message& message);
// JC_PORT_<NAME>: the environment variable that carries a port's number.
std::string PortEnvName(absl::string_view name);
// At most this many ports a task.
inline constexpr int kMaxPortsPerTask = 8;

// Splits a comma-separated list as the standard writes them ("center1,center2"; the
// full-width comma "，" of the Chinese examples is accepted too), trimming blanks and
// dropping empty items.
std::vector<std::string> SplitList(absl::string_view list);
std::string JoinList(const std::vector<std::string>& items);

}  // namespace jc
