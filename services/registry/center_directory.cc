#include "services/registry/center_directory.h"

#include "services/registry/registry.h"

namespace jc::registry {
namespace {

class LocalCenterDirectory final : public CenterDirectory {
 public:
  explicit LocalCenterDirectory(Registry* registry) : registry_(registry) {}
  absl::StatusOr<v1::Center> GetCenter(const std::string& id) override {
    return registry_->Get(id);
  }
  absl::StatusOr<std::vector<v1::Center>> ListCenters() override {
    std::vector<v1::Center> out;
    v1::ListCentersRequest req;
    req.set_page_size(1000);
    do {
      auto page = registry_->List(req);
      if (!page.ok()) return page.status();
      for (auto& c : *page->mutable_centers()) out.push_back(std::move(c));
      req.set_page_token(page->next_page_token());
    } while (!req.page_token().empty());
    return out;
  }
  absl::StatusOr<int> Heartbeat(const std::string& id, bool healthy) override {
    return registry_->Heartbeat(id, healthy);
  }

 private:
  Registry* registry_;
};

}  // namespace

std::unique_ptr<CenterDirectory> MakeLocalCenterDirectory(Registry* registry) {
  return std::make_unique<LocalCenterDirectory>(registry);
}

}  // namespace jc::registry
