// A job's stored document is written with its request encoded once and spliced in
// (JobManager::Encode): what is read back must be the record that was written.

#include <catch2/catch.hpp>

#include "common/store/doc.h"
#include "jointcloud/v1/job_record.pb.h"

namespace {

namespace v1 = ::jointcloud::v1;

std::string Spliced(v1::JobRecord record) {
  std::string request = *jc::store::EncodeDoc(record.request());
  record.clear_request();
  return jc::store::SpliceDocField("request", request, *jc::store::EncodeDoc(record));
}

}  // namespace

TEST_CASE("a stored job document with its request spliced in reads back as the record written [A7]", "[A7]") {
  v1::JobRecord record;
  record.set_job_id("job-00000042");
  record.set_seq(42);
  record.set_status("running");
  record.mutable_request()->set_name("train \"quoted\", {braces}");
  auto* task = record.mutable_request()->add_tasks();
  task->set_command("python -c 'print({\"a\": 1})'");
  task->set_replica_number(2);
  auto* rep = record.add_replicas();
  rep->set_center_id("center-a");
  rep->set_attempt(1);

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
