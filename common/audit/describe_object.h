#pragma once

// What a request acts on, for the audit log: its identifying fields ("ai_center_id=bj-1",
// "data_name=imagenet data_version=v1", "job_id=job-00000007"), found by name in the
// request or in the resource it carries.

#include <string>

#include <google/protobuf/message.h>

namespace jc::audit {

std::string DescribeObject(const google::protobuf::Message& request);

}  // namespace jc::audit
