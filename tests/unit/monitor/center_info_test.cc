// When the monitor asks a center's adapter what the center is (GetCenterInfo): once, then
// every info_refresh — and at every poll while the center said it holds nothing, which an
// adapter says when it was asked before its cluster's hosts came up (SPEC A3).

#include <catch2/catch.hpp>

#include "common/clock.h"
#include "services/monitor/monitor.h"
#include "services/registry/center_directory.h"
#include "services/southbound/adapter_client.h"

namespace {

namespace apb = ::jointcloud::adapter::v1;
namespace v1 = ::jointcloud::v1;
using jc::southbound::AdapterAt;

// One center, "nx", whose adapter lives at a made-up address (never dialled: the fake below
// answers for it).
class OneCenter : public jc::registry::CenterDirectory {
 public:
  absl::StatusOr<v1::Center> GetCenter(const std::string&) override { return Center(); }
  absl::StatusOr<std::vector<v1::Center>> ListCenters() override { return std::vector<v1::Center>{Center()}; }
  absl::StatusOr<int> Heartbeat(const std::string&, bool) override { return 1; }

 private:
  static v1::Center Center() {
    v1::Center c;
    c.set_ai_center_id("nx");
    c.set_adapter_address("127.0.0.1:1");
    c.mutable_capacity()->set_cpu(8);
    return c;
  }
};

// The monitor asks an adapter for its usage and what it holds, nothing else.
constexpr char kNotAsked[] = "not asked by the monitor";

// An adapter whose center's hosts come up when the test says: until then it describes a
// capacity of nothing, as the native adapter does with no nexec host joined.
class Adapter : public jc::southbound::AdapterClient {
 public:
  int cpus = 0;
  int info_calls = 0;
  absl::StatusOr<apb::Usage> GetUsage(const AdapterAt&, absl::Duration) override {
    apb::Usage u;
    u.mutable_free()->set_cpu(cpus);
    return u;
  }
  absl::StatusOr<apb::CenterInfo> GetCenterInfo(const AdapterAt&, absl::Duration) override {
    ++info_calls;
    apb::CenterInfo info;
    info.mutable_capacity()->set_cpu(cpus);
    return info;
  }
  absl::StatusOr<apb::ListAccountingResponse> ListAccounting(const AdapterAt&, const apb::ListAccountingRequest&) override {
    return absl::UnimplementedError(kNotAsked);
  }
  absl::StatusOr<apb::Replica> Submit(const AdapterAt&, const apb::SubmitReplicaRequest&) override {
    return absl::UnimplementedError(kNotAsked);
  }
  absl::Status Stop(const AdapterAt&, const apb::ReplicaKey&) override { return absl::UnimplementedError(kNotAsked); }
  absl::StatusOr<apb::Replica> Withdraw(const AdapterAt&, const apb::ReplicaKey&) override {
    return absl::UnimplementedError(kNotAsked);
  }
  absl::StatusOr<apb::Replica> Get(const AdapterAt&, const apb::ReplicaKey&) override {
    return absl::UnimplementedError(kNotAsked);
  }
  absl::Status Watch(const AdapterAt&, uint64_t, const std::function<void(const apb::ReplicaEvent&)>&,
                     const std::function<bool()>&) override {
    return absl::UnimplementedError(kNotAsked);
  }
  absl::StatusOr<apb::StageDatasetResponse> Stage(const AdapterAt&, const apb::StageDatasetRequest&) override {
    return absl::UnimplementedError(kNotAsked);
  }
  absl::StatusOr<std::string> ReadLog(const AdapterAt&, const apb::ReplicaKey&, int64_t) override {
    return absl::UnimplementedError(kNotAsked);
  }
};

int DescribedCpus(const jc::monitor::Monitor& m) {
  auto seen = m.Observations();
  return seen.size() == 1 && seen[0].has_info ? seen[0].info.capacity().cpu() : -1;
}

}  // namespace

TEST_CASE("a center that said it holds nothing is asked what it holds again at the next poll, not an info_refresh "
          "later, and one that holds something only every info_refresh [A3]",
          "[A3]") {
  OneCenter centers;
  Adapter adapter;
  jc::FakeClock clock;
  jc::monitor::MonitorOptions options;
  options.info_refresh = absl::Minutes(1);
  jc::monitor::Monitor monitor(&centers, &adapter, &clock, options);

  REQUIRE(monitor.PollOnce().ok());
  CHECK(DescribedCpus(monitor) == 0);  // asked before its hosts came up
  adapter.cpus = 8;                    // they join
  clock.Advance(absl::Seconds(5));
  REQUIRE(monitor.PollOnce().ok());
  CHECK(DescribedCpus(monitor) == 8);  // the next poll, not a minute later
  CHECK(adapter.info_calls == 2);

  // Holding something, it is asked again only once info_refresh has passed.
  adapter.cpus = 12;
  clock.Advance(absl::Seconds(5));
  REQUIRE(monitor.PollOnce().ok());
  CHECK(DescribedCpus(monitor) == 8);
  CHECK(adapter.info_calls == 2);
  clock.Advance(absl::Minutes(1));
  REQUIRE(monitor.PollOnce().ok());
  CHECK(DescribedCpus(monitor) == 12);
  CHECK(adapter.info_calls == 3);
}
