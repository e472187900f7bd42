#pragma once

// What a centers watch sends (WatchCenters): every center as a JOINED event at the current
// revision for a fresh watcher (list-then-watch, as in Kubernetes), then each change
// after the cursor. The stream runs on the hub (common/watch_call.h).

#include <memory>

#include "common/watch_call.h"
#include "jointcloud/v1/registry.pb.h"
#include "services/registry/registry.h"

namespace jc::registry {

std::unique_ptr<WatchFeed<v1::CenterEvent>> MakeCenterWatchFeed(Registry* registry,
                                                                const v1::WatchCentersRequest& request);

}  // namespace jc::registry
