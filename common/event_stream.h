#pragma once

// A server-streaming gRPC call that sends an EventLog's events after a cursor until the
// client goes away: the adapter's Watch and WatchBatches and the nexec master's Watch (issue
// 32 item 4: one copy of the loop). The control plane's own watches run on WatchHub (watch_hub.h), which
// multiplexes many streams on one thread instead.

#include <grpcpp/server_context.h>
#include <grpcpp/support/sync_stream.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/event_log.h"

namespace jc {

struct EventStreamMessages {
  std::string closed;     // UNAVAILABLE: the log closed (the server is stopping)
  std::string compacted;  // OUT_OF_RANGE: events after the cursor are no longer kept
};

// Sends every event after `since` as it is appended, `prepare` applied to each first (it may
// hide what the caller may not see), until the client cancels or stops reading (OK), the log
// closes (UNAVAILABLE) or the cursor falls out of its window (OUT_OF_RANGE).
template <typename Event>
grpc::Status StreamEvents(grpc::ServerContext* ctx, EventLog<Event>& log, uint64_t since,
                          grpc::ServerWriter<Event>* writer, const EventStreamMessages& messages,
                          const std::function<void(Event&)>& prepare = {}) {
  std::vector<Event> batch;
  while (!ctx->IsCancelled()) {
    batch.clear();
    // Woken by an append; the timeout only lets a cancelled client be noticed.
    auto read = log.WaitAfter(since, absl::Milliseconds(500), &batch);
    if (read == EventLog<Event>::Read::kClosed) return grpc::Status(grpc::StatusCode::UNAVAILABLE, messages.closed);
    if (read == EventLog<Event>::Read::kCompacted) {
      return grpc::Status(grpc::StatusCode::OUT_OF_RANGE, messages.compacted);
    }
    for (auto& e : batch) {
      if (prepare) prepare(e);
      if (!writer->Write(e)) return grpc::Status::OK;
      since = e.cursor();
    }
  }
  return grpc::Status::OK;
}

// StreamEvents with the events there to send at once in one `Batch` message (a repeated
// `events` field of Event), so a group commit's hundred events cost the stream one write and
// its reader one read rather than a hundred of each (issue 48). A message holds at most about
// kEventBatchBytes of events; an event larger than that goes alone.
inline constexpr size_t kEventBatchBytes = 1 << 20;
template <typename Event, typename Batch>
grpc::Status StreamEventBatches(grpc::ServerContext* ctx, EventLog<Event>& log, uint64_t since,
                                grpc::ServerWriter<Batch>* writer, const EventStreamMessages& messages,
                                const std::function<void(Event&)>& prepare = {}) {
  std::vector<Event> events;
  Batch batch;
  while (!ctx->IsCancelled()) {
    events.clear();
    auto read = log.WaitAfter(since, absl::Milliseconds(500), &events);
    if (read == EventLog<Event>::Read::kClosed) return grpc::Status(grpc::StatusCode::UNAVAILABLE, messages.closed);
    if (read == EventLog<Event>::Read::kCompacted) {
      return grpc::Status(grpc::StatusCode::OUT_OF_RANGE, messages.compacted);
    }
    size_t bytes = 0;
    auto send = [&] {
      const bool sent = writer->Write(batch);
      if (sent) since = batch.events(batch.events_size() - 1).cursor();
      batch.Clear();
      bytes = 0;
      return sent;
    };
    for (auto& e : events) {
      if (prepare) prepare(e);
      const size_t size = e.ByteSizeLong();
      if (batch.events_size() > 0 && bytes + size > kEventBatchBytes && !send()) return grpc::Status::OK;
      bytes += size;
      *batch.add_events() = std::move(e);
    }
    if (batch.events_size() > 0 && !send()) return grpc::Status::OK;
  }
  return grpc::Status::OK;
}

}  // namespace jc
