// What an adapter's book costs as it grows, and what forgetting ended replicas gives back
// (AdapterCore::ForgetEnded, a center's replica_retention). A backend in memory (no
// scheduler's cost in the figures) holds `live` running replicas; then `ended` more are
// submitted and end. Timed, in CPU of this process, per pass of what runs all day long:
// the poller's PollOnce and the monitor's Usage(), with no ended replica in the book, with
// `ended` of them, and once they are forgotten; and the store's rows at each step. The passes
// walk only the replicas not ended, so the second figure should be the first's, not
// `ended` / `live` times it (the book before session 60 walked every replica it ever had).
// Then a center with `queued` more replicas that do not end (a deep queue): the adapter's own
// CPU per second while nothing happens (the prober's four passes a second walked every replica
// not ended, looking each up by name, before session 61; they walk those serving an endpoint),
// and a stop of one replica (which found its gang by a walk of every replica not ended).
// Prints figures; asserts nothing.
//   build/tests/bench/adapter_book_bench [live=1000] [ended=100000] [passes=200] [queued=20000]

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "adapters/sdk/adapter_core.h"
#include "adapters/sdk/center_config.h"
#include "common/store/schema.h"
#include "common/store/store.h"
#include "spdlog/spdlog.h"
#include "tests/testing/memory_scheduler.h"

namespace {

namespace pb = jc::adapter::pb;

double CpuSeconds() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

void SubmitMany(jc::adapter::AdapterCore& core, int count, const std::string& prefix) {
  constexpr int kBatch = 500;
  for (int done = 0; done < count;) {
    pb::SubmitReplicasRequest req;
    for (int i = 0; i < kBatch && done < count; ++i, ++done) {
      pb::SubmitReplicaRequest* r = req.add_replicas();
      r->mutable_key()->set_job_id(absl::StrCat(prefix, done));
      r->set_command("true");
      r->set_resource_spec_id("cpu-1");
    }
    for (const auto& answer : core.SubmitMany(req)) {
      if (!answer.ok()) {
        std::fprintf(stderr, "submit refused: %s\n", answer.status().ToString().c_str());
        std::exit(1);
      }
    }
  }
}

// CPU per pass of the poller's PollOnce and the monitor's Usage(), in microseconds.
double PassMicros(jc::adapter::AdapterCore& core, int passes) {
  const double before = CpuSeconds();
  for (int i = 0; i < passes; ++i) {
    if (absl::Status polled = core.PollOnce(); !polled.ok()) std::fprintf(stderr, "%s\n", polled.ToString().c_str());
    if (auto usage = core.Usage(); !usage.ok()) std::fprintf(stderr, "%s\n", usage.status().ToString().c_str());
  }
  return (CpuSeconds() - before) * 1e6 / passes;
}

int64_t Rows(jc::store::Store& store) {
  auto rows = store.Query("SELECT COUNT(*) FROM adapter_replicas");
  int64_t n = 0;
  if (!rows.ok() || rows->empty() || !(*rows)[0][0] || !absl::SimpleAtoi(*(*rows)[0][0], &n)) return -1;
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  int live = 1000, ended = 100000, passes = 200;
  if (argc > 1 && !absl::SimpleAtoi(argv[1], &live)) return 2;
  if (argc > 2 && !absl::SimpleAtoi(argv[2], &ended)) return 2;
  if (argc > 3 && !absl::SimpleAtoi(argv[3], &passes)) return 2;
  int queued = 20000;
  if (argc > 4 && !absl::SimpleAtoi(argv[4], &queued)) return 2;
  spdlog::set_level(spdlog::level::warn);  // a line per batch forgotten otherwise
  const auto dir = std::filesystem::temp_directory_path() / absl::StrCat("jc-adapter-book-bench-", getpid());
  std::filesystem::create_directories(dir);
  auto store = jc::store::OpenStore("sqlite://" + (dir / "adapter.db").string());
  if (!store.ok() || !jc::store::Migrate(**store).ok()) {
    std::fprintf(stderr, "no store in %s\n", dir.c_str());
    return 1;
  }
  auto center = jc::adapter::ParseCenterConfig("center_id: bench\nspecs:\n  - {id: cpu-1, cpu: 1, memory: 1Gi}\n");
  if (!center.ok()) return 1;
  jc::testing::MemoryScheduler backend(pb::REPLICA_RUNNING);  // replicas run at submit
  jc::adapter::CoreOptions options;
  options.poll_interval = absl::Hours(1);  // the bench polls, not the poller
  jc::adapter::AdapterCore core(&backend, *center, store->get(), options);
  if (!core.Start().ok()) return 1;

  SubmitMany(core, live, "live-");
  const double none = PassMicros(core, passes);
  std::printf("%d running replicas, no ended one in the book: %.1f us of CPU per pass (PollOnce + Usage); %lld rows\n",
              live, none, static_cast<long long>(Rows(**store)));

  const int64_t first_ended = backend.submitted() + 1;
  SubmitMany(core, ended, "ended-");
  backend.SetFrom(first_ended, pb::REPLICA_SUCCEEDED);
  const double recording = CpuSeconds();
  if (absl::Status polled = core.PollOnce(); !polled.ok()) return 1;  // records the ends
  std::printf("%d replicas ended, recorded by one poll in %.2f s of CPU\n", ended, CpuSeconds() - recording);
  const double full = PassMicros(core, passes);
  std::printf("the same %d running, %d ended in the book: %.1f us per pass (%.2fx the first); %lld rows\n", live,
              ended, full, full / none, static_cast<long long>(Rows(**store)));

  const double forgetting = CpuSeconds();
  size_t forgotten = 0;
  for (;;) {
    auto batch = core.ForgetEnded(absl::Now() + center->replica_retention + absl::Hours(1));
    if (!batch.ok()) {
      std::fprintf(stderr, "%s\n", batch.status().ToString().c_str());
      return 1;
    }
    if (*batch == 0) break;
    forgotten += *batch;
  }
  std::printf("%zu forgotten past the retention in %.2f s of CPU (%.1f us each)\n", forgotten,
              CpuSeconds() - forgetting, (CpuSeconds() - forgetting) * 1e6 / std::max<size_t>(1, forgotten));
  const double after = PassMicros(core, passes);
  std::printf("after forgetting: %.1f us per pass (%.2fx the first); %lld rows\n", after, after / none,
              static_cast<long long>(Rows(**store)));

  // A deep queue: the book's idle cost and a stop's, with live + queued replicas not ended.
  SubmitMany(core, queued, "queued-");
  constexpr double kIdleSeconds = 3;
  const double idle_from = CpuSeconds();
  absl::SleepFor(absl::Seconds(kIdleSeconds));
  const double idle = (CpuSeconds() - idle_from) / kIdleSeconds;
  const int stops = std::max(1, std::min(200, queued));  // of the queued replicas, each once
  SubmitMany(core, queued == 0 ? 1 : 0, "queued-");        // with none queued, one to stop
  const double stopping = CpuSeconds();
  for (int i = 0; i < stops; ++i) {
    pb::ReplicaKey key;
    key.set_job_id(absl::StrCat("queued-", i));
    if (auto stopped = core.StopReplica(key); !stopped.ok()) {
      std::fprintf(stderr, "%s\n", stopped.status().ToString().c_str());
      return 1;
    }
  }
  const double stop = (CpuSeconds() - stopping) * 1e6 / stops;
  std::printf("%d more replicas queued (%d not ended): idle, %.2f ms of CPU per second; a stop of one, %.1f us of CPU\n",
              queued, live + queued, idle * 1e3, stop);
  core.Stop();
  std::filesystem::remove_all(dir);
  return 0;
}
