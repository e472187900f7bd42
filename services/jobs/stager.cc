#include "services/jobs/stager.h"

#include "absl/strings/str_cat.h"

namespace jc::jobs {

void Stager::Stage(std::string center, std::vector<std::string> datasets, std::function<void(absl::Status)> done) {
  pool_->Run([this, center = std::move(center), datasets = std::move(datasets), done = std::move(done)] {
    done(CopyAll(center, datasets));
  });
}

absl::Status Stager::CopyAll(const std::string& center, const std::vector<std::string>& datasets) {
  auto address = addresses_->Of(center);
  if (!address.ok()) return address.status();
  std::lock_guard<std::mutex> lock(one_copy_at_a_time_);
  for (const auto& key : datasets) {
    size_t colon = key.rfind(':');
    std::string name = key.substr(0, colon), version = colon == std::string::npos ? "" : key.substr(colon + 1);
    auto sources = mover_->Sources(name, version, center);
    if (!sources.ok()) {
      return absl::Status(sources.status().code(), absl::StrCat("staging ", key, ": ", sources.status().message()));
    }
    if (sources->empty()) continue;  // already there
    apb::StageDatasetRequest req;
    req.set_data_name(name);
    req.set_data_version(version);
    for (const auto& url : *sources) req.add_source_urls(url);
    auto copy = adapters_->Stage({center, *address}, req);
    if (!copy.ok()) {
      return absl::Status(copy.status().code(), absl::StrCat("staging ", key, ": ", copy.status().message()));
    }
    // Not recorded, the copy is still there; the next job that needs the dataset here
    // copies it again (the adapter answers at once with what it has).
    DataMover::Transfer transfer{copy->source_url(), copy->seconds(),
                                 {copy->failed_source_urls().begin(), copy->failed_source_urls().end()}};
    absl::Status recorded = mover_->AddLocation(name, version, center, copy->dataset().url(), transfer);
    if (!recorded.ok()) {
      return absl::Status(recorded.code(), absl::StrCat("staging ", key, ": the copy at ", center,
                                                        " could not be recorded: ", recorded.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace jc::jobs
