#pragma once

// A private munged for a test binary, as scripts/slurm.sh runs one for Slurm: a fresh key
// in a temporary directory, the socket beside it. nexec's daemons, CLI and adapter find it
// through $NEXEC_MUNGE_SOCKET, which this sets, so every process the test starts signs and
// verifies with it. Stopped when the test binary exits.

#include <string>

namespace jc::testing {

// Starts it once per process and returns its socket; throws when munged cannot start.
const std::string& UsePrivateMunged();

}  // namespace jc::testing
