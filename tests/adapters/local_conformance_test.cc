// The conformance kit against the SDK's example adapter (replicas as local processes).

#include <unistd.h>

#include <filesystem>

#include "adapters/example/local_backend.h"
#include "adapters/sdk/conformance/conformance.h"

namespace jc::adapter::conformance {

namespace {

// Where the replicas of this test process run; removed when the process ends.
struct WorkDir {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("jc-local-adapter-" + std::to_string(getpid()));
  ~WorkDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

}  // namespace

ConformanceTarget MakeConformanceTarget() {
  static const WorkDir work_dir;
  static const std::string work = work_dir.path.string();
  ConformanceTarget t;
  t.runs_commands = true;  // setpriv in the replica's account
  t.name = "example (local processes) adapter";
  t.make_backend = [] { return std::make_unique<LocalBackend>(work, 8, 16384); };
  auto center = ParseCenterConfig(R"(
center_id: local-test
security_grade: 2
specs:
  - {id: small, cpu: 1, memory: 512Mi}
images:
  - {id: pytorch-2, name: PyTorch 2, framework: PyTorch}
)");
  t.center = *center;
  t.spec_id = "small";
  return t;
}

}  // namespace jc::adapter::conformance
