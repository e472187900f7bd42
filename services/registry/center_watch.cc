#include "services/registry/center_watch.h"

namespace jc::registry {
namespace {

class CenterWatchFeed final : public WatchFeed<v1::CenterEvent> {
 public:
  CenterWatchFeed(Registry* registry, uint64_t since) : registry_(registry), since_(since) {}

  absl::Status Open(std::vector<v1::CenterEvent>* first, bool*) override {
    if (since_ > registry_->events().last_revision()) {
      return absl::OutOfRangeError("since_revision is ahead of the server; watch from 0");
    }
    if (since_ > 0) return Next(first, nullptr);
    since_ = registry_->events().last_revision();
    v1::ListCentersRequest page;
    page.set_page_size(1000);
    do {
      auto listed = registry_->List(page);
      if (!listed.ok()) return listed.status();
      for (const auto& center : listed->centers()) {
        v1::CenterEvent event;
        event.set_revision(since_);
        event.set_type(v1::CenterEvent::JOINED);
        *event.mutable_center() = center;
        event.set_previous_status(center.status());
        first->push_back(std::move(event));
      }
      page.set_page_token(listed->next_page_token());
    } while (!page.page_token().empty());
    return absl::OkStatus();
  }

  absl::Status Next(std::vector<v1::CenterEvent>* out, bool*) override {
    size_t before = out->size();
    auto read = registry_->events().WaitAfter(since_, absl::ZeroDuration(), out);
    if (read == EventLog<v1::CenterEvent>::Read::kClosed) return absl::UnavailableError("server is shutting down");
    if (read == EventLog<v1::CenterEvent>::Read::kCompacted) {
      out->resize(before);
      return absl::OutOfRangeError("events after since_revision were compacted; watch from 0");
    }
    if (out->size() > before) since_ = out->back().revision();
    return absl::OkStatus();
  }

 private:
  Registry* const registry_;
  uint64_t since_;
};

}  // namespace

std::unique_ptr<WatchFeed<v1::CenterEvent>> MakeCenterWatchFeed(Registry* registry,
                                                                const v1::WatchCentersRequest& request) {
  return std::make_unique<CenterWatchFeed>(registry, request.since_revision());
}

}  // namespace jc::registry
