#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "common/grpc_status.h"
#include "common/rest_envelope.h"

TEST_CASE("the REST envelope carries status, code, errorMsg and data", "[A12][C5]") {
  auto ok = nlohmann::json::parse(jc::MakeEnvelope(absl::OkStatus(), R"({"a":1})"));
  CHECK(ok["status"] == 200);
  CHECK(ok["code"] == "OK");
  CHECK(ok["errorMsg"] == "");
  CHECK(ok["data"]["a"] == 1);
  // Byte for byte: the data spliced in as it is; none is null.
  CHECK(jc::MakeEnvelope(absl::OkStatus(), R"({"a":1})") == R"({"status":200,"code":"OK","errorMsg":"","data":{"a":1}})");
  CHECK(jc::MakeEnvelope(absl::OkStatus(), "") == R"({"status":200,"code":"OK","errorMsg":"","data":null})");
  CHECK(jc::MakeEnvelope(absl::OkStatus(), "[]") == R"({"status":200,"code":"OK","errorMsg":"","data":[]})");

  auto missing = nlohmann::json::parse(
      jc::MakeEnvelope(absl::NotFoundError("center \"x\" not found"), R"({"a":1})"));
  CHECK(missing["status"] == 404);
  CHECK(missing["code"] == "NOT_FOUND");
  CHECK(missing["errorMsg"] == "center \"x\" not found");
  CHECK(missing["data"].is_null());

  CHECK(jc::HttpStatusFor(absl::StatusCode::kAlreadyExists) == 409);
  CHECK(jc::HttpStatusFor(absl::StatusCode::kInvalidArgument) == 400);
  auto big = nlohmann::json::parse(jc::MakeHttpErrorEnvelope(413, "body too large"));
  CHECK(big["status"] == 413);
  CHECK(big["code"] == "PAYLOAD_TOO_LARGE");
}

TEST_CASE("absl and gRPC statuses convert both ways without loss", "[A13]") {
  auto grpc_status = jc::ToGrpcStatus(absl::AlreadyExistsError("dup"));
  CHECK(grpc_status.error_code() == grpc::StatusCode::ALREADY_EXISTS);
  CHECK(grpc_status.error_message() == "dup");
  auto back = jc::FromGrpcStatus(grpc_status);
  CHECK(absl::IsAlreadyExists(back));
  CHECK(back.message() == "dup");
  CHECK(jc::FromGrpcStatus(grpc::Status::OK).ok());
}
