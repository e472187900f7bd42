#pragma once

// A REST route of the gateway: its HTTP shape (for serving and for the OpenAPI
// document, which is generated from the same table so the two cannot drift apart) and the
// handler that turns the request into a gRPC call.

#include <functional>
#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>

#include "absl/status/status.h"
#include "common/json_proto.h"

namespace httplib {
struct Request;
class DataSink;
}

namespace jc::gateway {

struct RestResult {
  absl::Status status;
  std::string data_json;  // protobuf JSON of the envelope's data; empty for none
  // When set and the status is OK, data_json is sent as it is with this content type
  // instead of inside the envelope (file downloads such as logs).
  std::string raw_content_type = {};
  // When set and the status is OK: the body is written by this as it comes (an event
  // stream), with raw_content_type; it returns when the stream ends or the client left.
  std::function<void(httplib::DataSink&)> stream = {};
  // Ends the stream from another thread (the gateway stopping).
  std::function<void()> cancel = {};
};

struct QueryParam {
  std::string name;
  std::string type;  // "string" or "integer"
  std::string description;
};

using RestHandler = std::function<RestResult(const httplib::Request& request,
                                             const std::vector<std::string>& path_params)>;

struct Route {
  std::string method;  // GET, POST, PUT, PATCH, DELETE
  std::string path;    // OpenAPI template: /openapi/v1/centers/{ai_center_id}
  std::string tag;
  std::string summary;
  const google::protobuf::Descriptor* body = nullptr;  // request body schema, if any
  const google::protobuf::Descriptor* data = nullptr;  // envelope data schema, if any
  JsonNames names = JsonNames::kSnakeCase;
  std::vector<QueryParam> query;
  RestHandler handler;
  // The 200 answer is a text/event-stream of `data` items, not the envelope.
  bool event_stream = false;
  // One of the routes most requests take (a job's create, its status): installed before
  // the rest, so that a request is not matched against every other route's pattern first
  // (InstallOrder).
  bool busy = false;
};

}  // namespace jc::gateway
