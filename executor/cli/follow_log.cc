#include "executor/cli/follow_log.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"

namespace jc::nexec {
namespace {

namespace pb = ::nexec::v1;

// All of `data` to `fd` (a pipe or terminal may take it in parts); false once it takes no
// more (the reader went away).
bool WriteAll(int fd, const std::string& data) {
  for (size_t done = 0; done < data.size();) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

absl::Status FollowLog(pb::Master::Stub* stub, const ContextFactory& ctx, pb::ReadLogRequest req, int fd,
                       const FollowOptions& options) {
  absl::Status last;
  for (int attempt = 0; attempt <= options.reconnects; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(options.between_reconnects);
    auto c = ctx("ReadLog", req);
    if (req.follow()) c->set_deadline(std::chrono::system_clock::time_point::max());  // until the task ends
    auto reader = stub->ReadLog(c.get(), req);
    pb::LogChunk chunk;
    while (reader->Read(&chunk)) {
      if (!WriteAll(fd, chunk.data())) {
        c->TryCancel();
        reader->Finish().IgnoreError();  // CANCELLED, by the line above: the write's error is the answer
        return absl::AbortedError(absl::StrCat("cannot write the output here: ", std::strerror(errno)));
      }
      req.set_offset(chunk.offset() + static_cast<int64_t>(chunk.data().size()));
    }
    grpc::Status st = reader->Finish();
    if (st.ok()) return absl::OkStatus();
    last = absl::Status(static_cast<absl::StatusCode>(st.error_code()), st.error_message());
    // What the master refused stays refused; anything else may be the break of a restart.
    if (st.error_code() == grpc::StatusCode::INVALID_ARGUMENT ||
        (st.error_code() == grpc::StatusCode::NOT_FOUND && !options.task_exists) ||
        st.error_code() == grpc::StatusCode::PERMISSION_DENIED ||
        st.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
      return last;
    }
  }
  return last;
}

}  // namespace jc::nexec
