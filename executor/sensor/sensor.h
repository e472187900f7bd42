#pragma once

// Resource sensors (RESS, SPEC B1): executables that print YAML resource records,
// usually forever in a loop with `---` between rounds. The agent runs each one, parses
// every round, and reports the latest values in its heartbeats.

#include <sys/types.h>

#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nexec/v1/nexec.pb.h"

namespace jc::nexec {

// Parses one round of sensor output: a YAML list of records. Errors name the record and
// the field, e.g. `record 2 (licenses): value "many" is not a number`.
absl::StatusOr<std::vector<::nexec::v1::SensorResource>> ParseSensorOutput(const std::string& yaml);

// The sensors to run from `dir`, as SkyForm AIP names them: `ress.host` and
// `ress.<host>`, when present and executable.
std::vector<std::string> FindSensors(const std::string& dir, const std::string& host);

class SensorRunner {
 public:
  // Runs every sensor in `paths`; a sensor that exits is started again after
  // `restart_delay`.
  SensorRunner(std::vector<std::string> paths, absl::Duration restart_delay = absl::Seconds(5));
  ~SensorRunner();

  // The latest value of every resource any sensor reported.
  std::vector<::nexec::v1::SensorResource> Current() const;

 private:
  void Run(const std::string& path);

  std::vector<std::string> paths_;
  absl::Duration restart_delay_;
  mutable std::mutex mu_;
  std::map<std::string, ::nexec::v1::SensorResource> current_;
  std::map<std::string, pid_t> pids_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace jc::nexec
