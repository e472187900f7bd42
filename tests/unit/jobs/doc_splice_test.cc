// A job's stored document is written with its request encoded once and spliced in
// (JobManager::Encode): what is read back must be the record that was written. Since ADR
// 0002's amendment for jobs the rows are base64 protobuf; rows written as JSON before
// still read.

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "common/store/doc.h"
#include "jointcloud/v1/job_record.pb.h"

namespace {

namespace v1 = ::jointcloud::v1;

std::string Spliced(v1::JobRecord record) {
  std::string request = *jc::store::EncodeDoc(record.request());
  record.clear_request();
  return jc::store::SpliceDocField("request", request, *jc::store::EncodeDoc(record));
}

std::string SplicedBinary(v1::JobRecord record) {
  std::string request = record.request().SerializeAsString();
  record.clear_request();
  return jc::store::EncodeBinaryDocWith(record, v1::JobRecord::kRequestFieldNumber, request);
}

v1::JobRecord Sample() {
  v1::JobRecord record;
  record.set_job_id("job-00000042");
  record.set_seq(42);
  record.set_status("running");
  record.mutable_request()->set_name("train \"quoted\", {braces}");
  auto* task = record.mutable_request()->add_tasks();
  task->set_command("python -c 'print({\"a\": 1})'");
  task->set_replica_number(2);
  task->set_image_id(std::string(300, 'i'));  // a request longer than one varint byte says
  auto* rep = record.add_replicas();
  rep->set_center_id("center-a");
  rep->set_attempt(1);
  return record;
}

}  // namespace

TEST_CASE("a job row written as base64 protobuf with its request appended reads back as the record written, and a "
          "row an earlier control plane wrote as JSON still reads [A7]",
          "[A7]") {
  v1::JobRecord record = Sample();
  std::string binary = SplicedBinary(record);
  CHECK_FALSE(absl::StartsWith(binary, "{"));
  auto back = jc::store::DecodeAnyDoc<v1::JobRecord>(binary);
  REQUIRE(back.ok());
  CHECK(back->SerializeAsString() == record.SerializeAsString());
  // The JSON of before, spliced as JobManager::Encode wrote it then.
  auto old = jc::store::DecodeAnyDoc<v1::JobRecord>(Spliced(record));
  REQUIRE(old.ok());
  CHECK(old->SerializeAsString() == record.SerializeAsString());

  SECTION("a record that is only its request, and a request that is empty") {
    v1::JobRecord only;
    only.mutable_request()->set_name("n");
    auto read = jc::store::DecodeAnyDoc<v1::JobRecord>(SplicedBinary(only));
    REQUIRE(read.ok());
    CHECK(read->request().name() == "n");
    CHECK(read->job_id().empty());
    v1::JobRecord empty_request = Sample();
    empty_request.mutable_request()->Clear();
    auto empty = jc::store::DecodeAnyDoc<v1::JobRecord>(SplicedBinary(empty_request));
    REQUIRE(empty.ok());
    CHECK(empty->has_request());
    CHECK(empty->job_id() == "job-00000042");
  }
}

TEST_CASE("a stored job document with its request spliced in reads back as the record written [A7]", "[A7]") {
  v1::JobRecord record = Sample();

  auto back = jc::store::DecodeDoc<v1::JobRecord>(Spliced(record));
  REQUIRE(back.ok());
  CHECK(back->SerializeAsString() == record.SerializeAsString());

  SECTION("a record that is only its request") {
    v1::JobRecord only;
    only.mutable_request()->set_name("n");
    auto read = jc::store::DecodeDoc<v1::JobRecord>(Spliced(only));
    REQUIRE(read.ok());
    CHECK(read->request().name() == "n");
    CHECK(read->job_id().empty());
  }
}
