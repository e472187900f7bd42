// What an audit row says a request acts on (common/audit/describe_object.h).

#include <catch2/catch.hpp>

#include "common/audit/describe_object.h"
#include "jointcloud/v1/datamon.pb.h"
#include "jointcloud/v1/identity.pb.h"
#include "jointcloud/v1/jobs.pb.h"
#include "jointcloud/v1/registry.pb.h"

namespace {

using jc::audit::DescribeObject;

TEST_CASE("an audit row names what a request acts on: its most specific identifying field, a two-part key whole, "
          "or the resource it carries [C6]",
          "[C6]") {
  jointcloud::v1::StopTrainJobRequest stop;
  stop.set_job_id("job-00000007");
  CHECK(DescribeObject(stop) == "job_id=job-00000007");
  // A job's create: no id yet; its user first (with the project, the second part), then its name.
  jointcloud::v1::CreateTrainJobRequest create;
  create.set_name("train");
  CHECK(DescribeObject(create) == "name=train");
  create.set_project("vision");
  CHECK(DescribeObject(create) == "project=vision");
  create.set_user_name("alice");
  CHECK(DescribeObject(create) == "user_name=alice project=vision");
  create.clear_project();
  CHECK(DescribeObject(create) == "user_name=alice");
  // The resource a request carries, one or two levels down.
  jointcloud::v1::CreateCenterRequest center;
  center.mutable_center()->set_ai_center_id("bj-1");
  center.mutable_center()->set_name("Beijing 1");
  CHECK(DescribeObject(center) == "ai_center_id=bj-1");
  jointcloud::v1::CreateDatasetRequest dataset;
  dataset.mutable_dataset()->set_data_name("imagenet");
  CHECK(DescribeObject(dataset) == "data_name=imagenet");
  dataset.mutable_dataset()->set_data_version("v1");
  CHECK(DescribeObject(dataset) == "data_name=imagenet data_version=v1");
  jointcloud::v1::SetMembershipRequest member;
  member.set_user_name("bob");
  member.set_project("nlp");
  CHECK(DescribeObject(member) == "user_name=bob project=nlp");
  // Nothing identifying: nothing said. A value is cut at 128 bytes.
  CHECK(DescribeObject(jointcloud::v1::CreateCenterRequest()).empty());
  stop.set_job_id(std::string(300, 'j'));
  CHECK(DescribeObject(stop) == "job_id=" + std::string(128, 'j'));
}

}  // namespace
