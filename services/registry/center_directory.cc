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

 private:
  Registry* registry_;
};

}  // namespace

std::unique_ptr<CenterDirectory> MakeLocalCenterDirectory(Registry* registry) {
  return std::make_unique<LocalCenterDirectory>(registry);
}

}  // namespace jc::registry
