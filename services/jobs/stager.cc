#include "services/jobs/stager.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace jc::jobs {

void Stager::Stage(std::string center, std::string project, std::string image_id, std::string image,
                   std::vector<std::string> datasets, std::function<void(absl::Status)> done) {
  pool_->Run([this, center = std::move(center), project = std::move(project), image_id = std::move(image_id),
              image = std::move(image), datasets = std::move(datasets),
              done = std::move(done)] { done(CopyAll(center, project, image_id, image, datasets)); });
}

absl::Status Stager::StageImage(const std::string& center, const std::string& address, const std::string& project,
                                const std::string& image_id, const std::string& image) {
  auto copies = mover_->Image(project, image_id);
  if (!copies.ok()) {
    return absl::Status(copies.status().code(), absl::StrCat("staging image ", image_id, ": ", copies.status().message()));
  }
  if (std::find(copies->centers.begin(), copies->centers.end(), center) != copies->centers.end()) {
    return absl::OkStatus();  // the catalog lists it there
  }
  apb::StageImageRequest req;
  req.set_image_id(image_id);
  req.set_project(copies->project);  // the image's: a project's is kept apart at the center
  req.set_name(copies->name);
  req.set_image(image);
  // Sources: the holders that offer their images to other centers (CenterInfo.image_registry).
  for (const auto& holder : copies->centers) {
    auto at = addresses_->Of(holder);
    if (!at.ok()) continue;
    auto info = adapters_->GetCenterInfo({holder, *at}, absl::Seconds(10));
    if (info.ok() && !info->image_registry().empty()) {
      // Where the holder's SDK keeps it (staged_images.h): a project's under .projects/<project>/.
      req.add_source_urls(absl::StrCat(absl::StripSuffix(info->image_registry(), "/"), "/",
                                       copies->project.empty() ? "" : absl::StrCat(".projects/", copies->project, "/"),
                                       image_id));
    }
  }
  auto staged = adapters_->StageImage({center, address}, req);
  if (absl::IsUnimplemented(staged.status())) {
    // An adapter older than image staging: the scheduler placed the replica here because
    // it reports the image; its submit says if not.
    return absl::OkStatus();
  }
  if (!staged.ok()) {
    return absl::Status(staged.status().code(), absl::StrCat("staging image ", image_id, ": ", staged.status().message()));
  }
  // An image with content at a center without a registry of its own: its hosts pull it
  // when the task starts; nothing is there yet to record.
  if (!image.empty() && staged->source_url().empty()) return absl::OkStatus();
  if (absl::Status recorded = mover_->AddImageCenter(copies->project, image_id, center); !recorded.ok()) {
    return absl::Status(recorded.code(), absl::StrCat("staging image ", image_id, ": the copy at ", center,
                                                      " could not be recorded: ", recorded.message()));
  }
  return absl::OkStatus();
}

absl::Status Stager::CopyAll(const std::string& center, const std::string& project, const std::string& image_id,
                             const std::string& image, const std::vector<std::string>& datasets) {
  auto address = addresses_->Of(center);
  if (!address.ok()) return address.status();
  std::lock_guard<std::mutex> lock(one_copy_at_a_time_);
  if (!image_id.empty()) JC_RETURN_IF_ERROR(StageImage(center, *address, project, image_id, image));
  for (const auto& key : datasets) {
    size_t colon = key.rfind(':');
    std::string name = key.substr(0, colon), version = colon == std::string::npos ? "" : key.substr(colon + 1);
    // The job's project's dataset of that name and version, else the federation's.
    auto dataset_project = mover_->Project(name, version, project);
    if (!dataset_project.ok()) {
      return absl::Status(dataset_project.status().code(),
                          absl::StrCat("staging ", key, ": ", dataset_project.status().message()));
    }
    auto sources = mover_->Sources(name, version, *dataset_project, center);
    if (!sources.ok()) {
      return absl::Status(sources.status().code(), absl::StrCat("staging ", key, ": ", sources.status().message()));
    }
    if (sources->empty()) continue;  // already there
    apb::StageDatasetRequest req;
    req.set_data_name(name);
    req.set_data_version(version);
    req.set_project(*dataset_project);  // only its account reads the copy
    for (const auto& url : *sources) req.add_source_urls(url);
    auto copy = adapters_->Stage({center, *address}, req);
    if (!copy.ok()) {
      return absl::Status(copy.status().code(), absl::StrCat("staging ", key, ": ", copy.status().message()));
    }
    // Not recorded, the copy is still there; the next job that needs the dataset here
    // copies it again (the adapter answers at once with what it has).
    DataMover::Transfer transfer{copy->source_url(), copy->seconds(),
                                 {copy->failed_source_urls().begin(), copy->failed_source_urls().end()}};
    absl::Status recorded = mover_->AddLocation(name, version, *dataset_project, center, copy->dataset().url(), transfer);
    if (!recorded.ok()) {
      return absl::Status(recorded.code(), absl::StrCat("staging ", key, ": the copy at ", center,
                                                        " could not be recorded: ", recorded.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace jc::jobs
