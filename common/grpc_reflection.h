#pragma once

// gRPC server reflection (SPEC C8): every server lists its services and describes their
// methods, so grpcurl and grpcui work without the .proto files. Called before a
// ServerBuilder is made (the plugin is added to builders made after); a target that calls
// it links gRPC::grpc++_reflection. Reflection tells the API's shape and no data: it is
// public, as the OpenAPI document is (access_policy.cc).

#include <grpcpp/ext/proto_server_reflection_plugin.h>

namespace jc {

inline void EnableGrpcReflection() { grpc::reflection::InitProtoReflectionServerBuilderPlugin(); }

}  // namespace jc
