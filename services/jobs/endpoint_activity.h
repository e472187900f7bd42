#pragma once

// When an interactive job was last used (SPEC A17, idle limits): what the endpoint listener
// (services/endpoints) saw of it. The job manager stops a job idle past its idleTimeout.

#include <optional>
#include <string>

#include "absl/time/time.h"

namespace jc::jobs {

// A port whose replica reports its own use (PortSpec.activity_path), for the listener to ask.
struct ActivityProbe {
  std::string job_id;
  int task_index = 0;
  std::string port_name;
  std::string path;
};

class EndpointActivity {
 public:
  virtual ~EndpointActivity() = default;
  // The job's last use the listener knows of: a request through one of its endpoints, or
  // the latest time one of its replicas reported at an activity path (never after the
  // moment it was asked). nullopt: none since this process started.
  virtual std::optional<absl::Time> LastActivity(const std::string& job_id) = 0;
};

}  // namespace jc::jobs
