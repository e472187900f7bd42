#pragma once

#include <google/protobuf/timestamp.pb.h>
#include <google/protobuf/util/time_util.h>

#include "absl/time/time.h"

namespace jc {

inline google::protobuf::Timestamp ToTimestamp(absl::Time t) {
  return google::protobuf::util::TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(t));
}

inline absl::Time FromTimestamp(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

}  // namespace jc
