#pragma once

// Reads a Server-Sent Events stream (WHATWG HTML, "event stream interpretation") as it
// arrives in pieces: the one parser of the job event streams' clients (jcctl, the tests).
// Lines end with LF, CRLF or CR; a blank line ends an event; "field: value" or
// "field:value" (one leading space dropped); several data lines join with LF; a line
// starting with ':' is a comment (the server's heartbeat). Header-only: jcctl uses it
// without the control plane's libraries.

#include <string>
#include <string_view>

namespace jc {

struct SseEvent {
  std::string id;     // the last `id` field of the event
  std::string event;  // its type ("message" when the stream names none)
  std::string data;   // its data lines, joined with LF
  bool has_data = false;
};

class SseParser {
 public:
  // Feeds bytes as they come. `on_event(const SseEvent&)` is called for each complete
  // event that carried data and returns false to stop (Feed then returns false);
  // `on_comment(std::string_view)` for each comment line.
  template <typename OnEvent, typename OnComment>
  bool Feed(std::string_view bytes, OnEvent&& on_event, OnComment&& on_comment) {
    buffer_.append(bytes);
    size_t start = 0;
    while (true) {
      size_t end = buffer_.find_first_of("\r\n", start);
      if (end == std::string::npos) break;
      // A CR at the very end may be half of a CRLF still on its way.
      if (buffer_[end] == '\r' && end + 1 == buffer_.size()) break;
      std::string_view line(buffer_.data() + start, end - start);
      start = end + (buffer_[end] == '\r' && buffer_[end + 1] == '\n' ? 2 : 1);
      if (!Line(line, on_event, on_comment)) {
        buffer_.erase(0, start);
        return false;
      }
    }
    buffer_.erase(0, start);
    return true;
  }

 private:
  template <typename OnEvent, typename OnComment>
  bool Line(std::string_view line, OnEvent& on_event, OnComment& on_comment) {
    if (line.empty()) {  // the event is complete
      SseEvent done = std::move(event_);
      event_ = SseEvent();
      if (!done.has_data) return true;
      if (done.event.empty()) done.event = "message";
      return on_event(done);
    }
    if (line.front() == ':') {
      on_comment(line.substr(1));
      return true;
    }
    size_t colon = line.find(':');
    std::string_view field = line.substr(0, colon);
    std::string_view value = colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    if (field == "data") {
      if (event_.has_data) event_.data += '\n';
      event_.data.append(value);
      event_.has_data = true;
    } else if (field == "event") {
      event_.event = std::string(value);
    } else if (field == "id") {
      event_.id = std::string(value);
    }
    return true;  // `retry` and unknown fields are ignored
  }

  std::string buffer_;
  SseEvent event_;
};

}  // namespace jc
