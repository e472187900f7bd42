#include <catch2/catch.hpp>

#include "executor/master/access.h"
#include "executor/master/config.h"

using jc::nexec::CapacityConfig;
using jc::nexec::CapacityResource;
using jc::nexec::ParseConfig;

TEST_CASE("the executor configuration reads queues, host types, hosts and groups", "[B5][B6]") {
  auto c = ParseConfig(R"(
host_types:
  - name: fast
    cpu_factor: 2.5
hosts:
  - name: node1
    type: fast
    resources: {model: A100, fpga: true, nvlink: 4}
user_groups:
  ml: [alice, bob]
queues:
  - name: gpu
    priority: 20
    users: [ml]
    hosts: [node1+2, node2]
    max_slots: 64
    max_slots_per_user: 8
    balance: spread
    round_robin: true
    gpu_shared: false
    interactive: false
    rerun_on_host_failure: true
    run_window: "20:00-6:00  0:0:0-0:23:59"
    load_thresholds: {r1m: "0.7/2.0", memfree: {schedule: 1024}}
    threshold_action: kill
  - name: normal
default_queue: normal
)");
  INFO(c.status());
  REQUIRE(c.ok());
  CHECK(c->host_types[0].cpu_factor == 2.5);
  CHECK(c->hosts.at("node1").type == "fast");
  CHECK(std::get<bool>(c->hosts.at("node1").resources.at("fpga")));
  CHECK(std::get<double>(c->hosts.at("node1").resources.at("nvlink")) == 4);
  CHECK(std::get<std::string>(c->hosts.at("node1").resources.at("model")) == "A100");
  CHECK(c->user_groups.at("ml").size() == 2);
  REQUIRE(c->queues.size() == 2);
  const auto& gpu = c->queues[0];
  CHECK(gpu.priority == 20);
  CHECK(gpu.balance == jc::nexec::Balance::kSpread);
  CHECK(gpu.user_round_robin);
  CHECK_FALSE(gpu.allow_interactive);
  CHECK(gpu.rerun_on_host_failure);
  CHECK(gpu.hosts[0] == "node1+2");
  CHECK(gpu.run_window.text() == "20:00-6:00 0:0:0-0:23:59");
  CHECK(gpu.load_thresholds.at("r1m").schedule == 0.7);
  CHECK(gpu.load_thresholds.at("r1m").stop == 2.0);
  CHECK(gpu.load_thresholds.at("memfree").schedule == 1024.0);
  CHECK_FALSE(gpu.load_thresholds.at("memfree").stop.has_value());
  CHECK(gpu.threshold_kills);
  CHECK(c->queues[1].run_window.always_open());
  CHECK(c->default_queue == "normal");
  CHECK(ParseConfig("")->queues[0].name == "normal");  // no file: one open queue
}

TEST_CASE("bad configuration entries are named in the error", "[B5][C5]") {
  const std::pair<const char*, const char*> bad[] = {
      {"queues:\n  - name: q\n    balance: pile\n", "queues[0].balance: expected \"pack\" or \"spread\", got \"pile\""},
      {"queues:\n  - {name: q, pre_exec_timeout: soon}\n", "queues[0].pre_exec_timeout: expected a duration"},
      {"queues:\n  - {name: q, pre_exec_timeout: -5s}\n", "queues[0].pre_exec_timeout: expected a duration"},
      {"queues:\n  - {name: q, run_window: \"1:8:0-18:00\"}\n", "queues[0].run_window: time window \"1:8:0-18:00\": both ends"},
      {"queues:\n  - {name: q, run_window: \"night\"}\n", "queues[0].run_window: time window \"night\": expected begin-end"},
      {"queues:\n  - {name: q, pre_exec_retries: -1}\n", "queues[0].pre_exec_retries: must not be negative"},
      {"limits:\n  - {name: l, users: all, per_user: all, slots: 1}\n", "limits[0] (l): give users or per_user, not both"},
      {"queues:\n  - {name: q, fairshare: {shares: [{name: root, shares: 0}]}}\n", "queues[0].fairshare.shares[0].shares: must be positive"},
      {"queues:\n  - {name: q, fairshare: {shares: [{name: no-such-user-x}]}}\n", "is not a user (a leaf is a user, or default)"},
      {"queues:\n  - {name: q, fairshare: {shares: [{name: g, children: [{name: root}]}, {name: root}]}}\n", "user root is in the tree twice"},
      {"queues:\n  - {name: q, fairshare: {shares: [{name: root}], half_life: soon}}\n", "queues[0].fairshare.half_life: expected a duration"},
      {"queues:\n  - {name: q, fairshare: {half_life: 5h}}\n", "queues[0].fairshare: needs shares"},
      {"queues:\n  - {name: q, fairshare: {shares: [{name: root}], cpu_time_factor: -1}}\n", "queues[0].fairshare.cpu_time_factor: must not be negative"},
      {"queues:\n  - {name: q, drf: everyone}\n", "queues[0].drf: expected job, user or group"},
      {"queues:\n  - {name: q, drf: user, round_robin: true}\n", "queues[0].drf: orders the queue by itself"},
      {"queues:\n  - {name: q, preempt: [nosuch]}\n", "queues[0].preempt: no queue \"nosuch\""},
      {"queues:\n  - {name: q, capacity: {clusters: []}}\n", "queues[0].capacity.clusters: needs a list"},
      {"queues:\n  - {name: q, capacity: {resource: cpu, clusters: [{name: default}]}}\n",
       "queues[0].capacity.resource: expected slots or gpu, got \"cpu\""},
      {"queues:\n  - {name: q, capacity: {clusters: [{name: default, guarantee: -1}]}}\n",
       "queues[0].capacity.clusters[0].guarantee: must not be negative"},
      {"queues:\n  - {name: q, capacity: {clusters: [{name: default, guarantee: 4, max: 2}]}}\n",
       "queues[0].capacity.clusters[0].max: 2 is below the guarantee 4"},
      {"queues:\n  - {name: q, capacity: {clusters: [{name: no-such-user-x}]}}\n",
       "queues[0].capacity.clusters[0]: \"no-such-user-x\" is neither a user group nor a user"},
      {"user_groups: {g: [root]}\nqueues:\n  - {name: q, capacity: {clusters: [{name: g}, {name: root}]}}\n",
       "queues[0].capacity.clusters[1]: user root is already in virtual cluster g"},
      {"queues:\n  - {name: q, capacity: {clusters: [{name: default}, {name: default}]}}\n",
       "queues[0].capacity.clusters[1]: \"default\" twice"},
      {"queues:\n  - {name: q, capacity: {user_limit_factor: -1, clusters: [{name: default}]}}\n",
       "queues[0].capacity.user_limit_factor: must not be negative"},
      {"queues:\n  - {name: q, drf: job, capacity: {clusters: [{name: default}]}}\n",
       "queues[0].capacity: orders the queue by its clusters"},
      {"queues:\n  - {name: a, priority: 5, preempt: b}\n  - {name: b, priority: 9}\n",
       "queues[0].preempt: queue b (priority 9) is not below a (priority 5)"},
      {"queues:\n  - {name: q, max_preemptions: -1}\n", "queues[0].max_preemptions: must not be negative"},
      {"queues:\n  - {name: q, preempt_grace: forever}\n", "queues[0].preempt_grace: expected a duration"},
      {"queues:\n  - {name: q, load_thresholds: {r1m: \"a/4\"}}\n", "queues[0].load_thresholds.r1m: \"a\" is not a number"},
      {"queues:\n  - {name: q, load_thresholds: {r1m: \"/\"}}\n", "queues[0].load_thresholds.r1m: gives neither"},
      {"queues:\n  - {name: q, load_thresholds: {r1m: {stop: 4, halt: 5}}}\n", "queues[0].load_thresholds.r1m: unknown key"},
      {"queues:\n  - {name: q, threshold_action: stop}\n", "queues[0].threshold_action: expected suspend or kill"},
      {"hosts:\n  - {name: h, load_thresholds: [1, 2]}\n", "hosts[0].load_thresholds: must map a resource"},
      {"limits:\n  - {name: l, queues: nosuch, slots: 1}\n", "limits[0] (l).queues: no queue named \"nosuch\""},
      {"limits:\n  - {name: l, users: all}\n", "limits[0] (l): limits nothing"},
      {"limits:\n  - {name: l, slots: \"[2 1:8:0-18:00]\"}\n", "limits[0] (l).slots: \"[2 1:8:0-18:00]\": time window"},
      {"limits:\n  - {name: l, resources: \"mem,5\"}\n", "limits[0] (l).resources: \"mem,5\": expected [resource,value]"},
      {"limits:\n  - {name: l, per_host: \"~h1\", jobs: 1}\n", "limits[0] (l).per_host: names nobody"},
      {"limits:\n  - {name: l, jobs: 1}\n  - {name: l, jobs: 2}\n", "limits[1]: \"l\" twice"},
      {"queues:\n  - name: q\n    max_slots: lots\n", "queues[0].max_slots: has the wrong type"},
      {"queues:\n  - name: q\n    colour: red\n", "queues[0]: unknown key \"colour\""},
      {"queues:\n  - name: q\n  - name: q\n", "queues[1]: \"q\" twice"},
      {"queues:\n  - priority: 1\n", "queues[0]: needs a name"},
      {"queues:\n  - name: q\n    max_slots: -1\n", "slot limits must not be negative"},
      {"host_types:\n  - name: t\n    cpu_factor: 0\n", "host_types[0].cpu_factor: must be positive"},
      {"hosts:\n  - name: h\n    type: nope\n", "hosts[0].type: unknown host type \"nope\""},
      {"default_queue: ghost\n", "default_queue: no queue named \"ghost\""},
      {"queues: [\n", "not valid YAML"},
      {"nonsense: 1\n", "top level: unknown key \"nonsense\""},
      {"max_pend_jobs_per_user: -1\n", "max_pend_jobs_per_user: must be 0 (no limit) or more, got -1"},
      {"max_pend_jobs_per_user: many\n", "max_pend_jobs_per_user"},
      // A map where the list of queues belongs: yaml-cpp threw and the master died (found
      // by tests/fuzz/executor_config_fuzz).
      {"queues:\n ailure:n_on_hoailure: false\n", "nexec config: "},
  };
  for (const auto& [yaml, message] : bad) {
    auto c = ParseConfig(yaml);
    INFO(yaml);
    REQUIRE_FALSE(c.ok());
    CHECK(std::string(c.status().message()).find(message) != std::string::npos);
  }
}

TEST_CASE("who may submit for, act on and run commands in whose jobs follows administrators and group "
          "administrators",
          "[B9][A17]") {
  auto c = ParseConfig(R"(
administrators: [jcadapter]
user_groups:
  ml: {members: [alice, bob], admins: [carol]}
  ops: [dave]
)");
  REQUIRE(c.ok());
  using jc::nexec::MayControl;
  using jc::nexec::MaySubmitAs;
  using jc::nexec::Principal;
  CHECK(MaySubmitAs(*c, Principal{"alice", false}, "alice").ok());
  CHECK(MaySubmitAs(*c, Principal{"root", true}, "alice").ok());
  CHECK(MaySubmitAs(*c, Principal{"jcadapter", false}, "alice").ok());
  auto refused = MaySubmitAs(*c, Principal{"alice", false}, "root");
  CHECK(absl::IsPermissionDenied(refused));
  CHECK(refused.message().find("alice may not submit jobs as root") != std::string::npos);
  // A group administrator acts on the group's jobs but does not submit for its members.
  CHECK(absl::IsPermissionDenied(MaySubmitAs(*c, Principal{"carol", false}, "bob")));
  CHECK(MayControl(*c, Principal{"carol", false}, "bob").ok());
  CHECK(absl::IsPermissionDenied(MayControl(*c, Principal{"carol", false}, "dave")));
  CHECK(absl::IsPermissionDenied(MayControl(*c, Principal{"bob", false}, "alice")));
  CHECK(MayControl(*c, Principal{"bob", false}, "bob").ok());
  CHECK(MayControl(*c, Principal{"jcadapter", false}, "dave").ok());
  // A command in a job runs as its account: a group administrator, who may kill a
  // member's job, may not act as the member (SPEC A17, nexec exec).
  using jc::nexec::MayExec;
  CHECK(MayExec(*c, Principal{"bob", false}, "bob").ok());
  CHECK(MayExec(*c, Principal{"root", true}, "bob").ok());
  CHECK(MayExec(*c, Principal{"jcadapter", false}, "bob").ok());
  auto carol = MayExec(*c, Principal{"carol", false}, "bob");
  CHECK(absl::IsPermissionDenied(carol));
  CHECK(carol.message().find("carol may not run commands in a job of bob") != std::string::npos);
  CHECK(absl::IsPermissionDenied(MayExec(*c, Principal{"alice", false}, "bob")));

  auto bad = ParseConfig("user_groups:\n  ml: {members: [a], owners: [b]}\n");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("user_groups.ml") != std::string::npos);
}

TEST_CASE("a capacity queue reads its virtual clusters", "[B5]") {
  auto c = ParseConfig(
      "user_groups: {vision: [root]}\n"
      "queues:\n"
      "  - name: shared\n"
      "    capacity:\n"
      "      resource: gpu\n"
      "      user_limit_factor: 1.5\n"
      "      clusters:\n"
      "        - {name: vision, guarantee: 4, max: 8}\n"
      "        - {name: default, guarantee: 2}\n");
  REQUIRE(c.ok());
  REQUIRE(c->queues[0].capacity.has_value());
  const CapacityConfig& cap = *c->queues[0].capacity;
  CHECK(cap.resource == CapacityResource::kGpus);
  CHECK(cap.user_limit_factor == 1.5);
  REQUIRE(cap.clusters.size() == 2);
  CHECK(cap.clusters[0].name == "vision");
  CHECK(cap.clusters[0].guarantee == 4);
  CHECK(cap.clusters[0].max == 8);
  CHECK(cap.clusters[1].name == "default");
  CHECK(cap.clusters[1].max == 0);
  CHECK_FALSE(c->queues[0].fairshare.has_value());
  auto f = ParseConfig("queues:\n  - {name: q, fairshare: {shares: [{name: root}], preempt: true}}\n");
  REQUIRE(f.ok());
  CHECK(f->queues[0].fairshare->preemptive);
}
