#include "tests/testing/reflection/reflection_client.h"

#include <google/protobuf/descriptor.pb.h>

#include "absl/strings/str_cat.h"
#include "testing/reflection/reflection.grpc.pb.h"  // generated into the build tree

namespace jc::testing {
namespace {

namespace rpb = ::grpc::reflection::v1alpha;

absl::StatusOr<rpb::ServerReflectionResponse> Ask(const std::shared_ptr<grpc::Channel>& channel,
                                                  const rpb::ServerReflectionRequest& request,
                                                  const std::map<std::string, std::string>& metadata) {
  auto stub = rpb::ServerReflection::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  for (const auto& [key, value] : metadata) ctx.AddMetadata(key, value);
  auto stream = stub->ServerReflectionInfo(&ctx);
  rpb::ServerReflectionResponse response;
  const bool sent = stream->Write(request);
  stream->WritesDone();
  const bool read = sent && stream->Read(&response);
  grpc::Status status = stream->Finish();
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
  }
  if (!read) return absl::UnavailableError("the server answered nothing");
  if (response.has_error_response()) {
    return absl::Status(static_cast<absl::StatusCode>(response.error_response().error_code()),
                        response.error_response().error_message());
  }
  return response;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ListServicesByReflection(const std::shared_ptr<grpc::Channel>& channel,
                                                                  const std::map<std::string, std::string>& metadata) {
  rpb::ServerReflectionRequest request;
  request.set_list_services("");
  auto response = Ask(channel, request, metadata);
  if (!response.ok()) return response.status();
  std::vector<std::string> out;
  for (const auto& s : response->list_services_response().service()) out.push_back(s.name());
  return out;
}

absl::StatusOr<std::vector<std::string>> DescribeServiceByReflection(const std::shared_ptr<grpc::Channel>& channel,
                                                                     const std::string& service,
                                                                     const std::map<std::string, std::string>& metadata) {
  rpb::ServerReflectionRequest request;
  request.set_file_containing_symbol(service);
  auto response = Ask(channel, request, metadata);
  if (!response.ok()) return response.status();
  const std::string short_name = service.substr(service.rfind('.') + 1);
  for (const std::string& bytes : response->file_descriptor_response().file_descriptor_proto()) {
    google::protobuf::FileDescriptorProto file;
    if (!file.ParseFromString(bytes)) return absl::DataLossError("a file descriptor does not parse");
    if (service.rfind(file.package() + ".", 0) != 0) continue;
    for (const auto& s : file.service()) {
      if (s.name() != short_name) continue;
      std::vector<std::string> methods;
      for (const auto& m : s.method()) methods.push_back(m.name());
      return methods;
    }
  }
  return absl::NotFoundError(absl::StrCat("no service ", service, " in the descriptors the server sent"));
}

}  // namespace jc::testing
