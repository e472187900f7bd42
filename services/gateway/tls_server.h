#pragma once

// cpp-httplib's server over TLS, with a stream that reads TLS records whole. httplib's own
// SSLServer reads a request's header block through SSL_read one byte at a time and writes
// a response's head and body as two TLS records: with a token on every request, that was
// most of what HTTPS cost per job (docs/benchmarks.md). This server gives httplib a
// stream that decrypts up to 16 KB per SSL_read into a buffer, and sends a response's
// head together with what is written next (its body) as one record; a held head is sent
// before the stream reads again (so "100 Continue" is never held) and when the request
// ends. Everything else — routing, keep-alive, timeouts, limits — is httplib's.
//
// The certificate and key are looked at again at most every kTlsReloadSeconds when a
// connection arrives: replaced files (both, matching) serve new connections without a
// restart; files that do not load leave the ones in use, and say so in the log.

#include <openssl/ssl.h>
#include <sys/stat.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include <httplib.h>

namespace jc::gateway {

class TlsServer final : public httplib::Server {
 public:
  // PEM files; is_valid() is false when they do not load or do not match.
  TlsServer(const std::string& cert_chain_file, const std::string& private_key_file);
  ~TlsServer() override;
  TlsServer(const TlsServer&) = delete;
  TlsServer& operator=(const TlsServer&) = delete;

  bool is_valid() const override;
  // Ends every wait for a client's input (the handshake, an idle keep-alive, a request in
  // pieces) at once: called before stop(), so that a stop waits on no client's read
  // timeout. Answers being written still go out.
  void StopReading();

 private:
  bool process_and_close_socket(socket_t sock) override;
  // The context new connections use: reloaded first when the files changed.
  std::shared_ptr<SSL_CTX> Context();

  const std::string cert_file_, key_file_;
  mutable std::mutex mu_;
  std::shared_ptr<SSL_CTX> ctx_;            // guarded by mu_
  std::string loaded_stamp_;                // the files' mtimes and sizes when ctx_ was made
  std::chrono::steady_clock::time_point next_check_;
  int stop_fd_ = -1;  // an eventfd, written by StopReading
};

}  // namespace jc::gateway
