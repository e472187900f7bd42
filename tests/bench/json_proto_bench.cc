// protobuf JSON through jc::ProtoToJson / jc::JsonToProto (type descriptions cached,
// common/json_proto.cc) against protobuf's own MessageToJsonString / JsonStringToMessage
// (which build them again on each call), on the messages of the job path: a job record
// as the store keeps it, a REST create body, the create's answer; and a create body the
// gateway has parsed, read by reflection (ADR 0016) against its text through protobuf's
// parser. Same run, alternated.
//   build/tests/bench/json_proto_bench [calls]
#include <google/protobuf/util/json_util.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/json_proto.h"
#include "jointcloud/v1/job_record.pb.h"
#include "jointcloud/v1/jobs.pb.h"

namespace v1 = ::jointcloud::v1;
namespace pb = google::protobuf;

namespace {

double MicrosPerCall(int calls, const std::function<void()>& call) {
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) call();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / calls;
}

void Compare(const char* what, int calls, const std::function<void()>& theirs, const std::function<void()>& ours) {
  double t = 0, o = 0;
  for (int round = 0; round < 3; ++round) {  // alternated, so drift hits both
    t += MicrosPerCall(calls, theirs);
    o += MicrosPerCall(calls, ours);
  }
  std::printf("%-44s protobuf %6.2f us, jc %6.2f us per call: ratio jc/protobuf %.2f\n", what, t / 3, o / 3, o / t);
}

}  // namespace

int main(int argc, char** argv) {
  int calls = argc > 1 ? std::atoi(argv[1]) : 20000;
  v1::JobRecord record;
  record.set_job_id("job-00000042");
  record.set_seq(42);
  record.set_status("running");
  record.mutable_received_at()->set_seconds(1'700'000'000);
  for (int i = 0; i < 2; ++i) {
    auto* r = record.add_replicas();
    r->set_replica_index(i);
    r->set_state(v1::ReplicaRecord::RUNNING);
    r->set_center_id("bj-1");
    r->set_attempt(1);
  }
  const std::string body =
      R"({"name":"resnet50","tasks":[{"name":"train","command":"torchrun train.py","resourceSpecId":"gpu-1",)"
      R"("replicaNumber":2}],"scheduling":{"weightProfile":"cost","weights":{"cost":0.5}}})";
  v1::CreateTrainJobResponse answer;
  answer.set_job_id("job-00000042");
  auto* info = answer.add_task_infos();
  info->set_name("train");
  info->add_center_ids("bj-1");
  info->add_center_ids("");
  info->add_replica_status("running");
  info->add_replica_status("pending");

  pb::util::JsonPrintOptions stored;
  stored.preserve_proto_field_names = true;
  pb::util::JsonPrintOptions api;
  api.always_print_primitive_fields = true;
  std::string out;
  Compare("print a job record (store document)", calls,
          [&] { out.clear(); (void)pb::util::MessageToJsonString(record, &out, stored); },
          [&] { (void)jc::ProtoToJson(record, jc::JsonNames::kSnakeCase, false); });
  Compare("print a create's answer (REST, defaults)", calls,
          [&] { out.clear(); (void)pb::util::MessageToJsonString(answer, &out, api); },
          [&] { (void)jc::ProtoToJson(answer, jc::JsonNames::kCamelCase, true); });
  v1::CreateTrainJobRequest parsed;
  Compare("parse a create body (REST)", calls,
          [&] { (void)pb::util::JsonStringToMessage(body, &parsed, pb::util::JsonParseOptions()); },
          [&] { (void)jc::JsonToProto(body, &parsed); });
  // As the gateway reads a body since ADR 0016: nlohmann has parsed it (to check its fields);
  // before, its text went to protobuf's parser (doc.dump()), now reflection reads the document.
  const nlohmann::json doc = nlohmann::json::parse(body);
  Compare("read a parsed create body (the gateway's)", calls,
          [&] { (void)jc::JsonToProto(doc.dump(), &parsed); },
          [&] { (void)jc::JsonDocToProto(doc, &parsed); });
  return 0;
}
