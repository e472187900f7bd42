#pragma once

// cpp-httplib's server over TLS, with a stream that reads TLS records whole. httplib's own
// SSLServer reads a request's header block through SSL_read one byte at a time and writes
// a response's head and body as two TLS records: with a token on every request, that was
// most of what HTTPS cost per job (docs/benchmarks.md). This server gives httplib a
// stream that decrypts up to 16 KB per SSL_read into a buffer, and sends a response's
// head together with what is written next (its body) as one record; a held head is sent
// before the stream reads again (so "100 Continue" is never held) and when the request
// ends. Everything else — routing, keep-alive, timeouts, limits — is httplib's.

#include <openssl/ssl.h>

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

  bool is_valid() const override { return ctx_ != nullptr; }

 private:
  bool process_and_close_socket(socket_t sock) override;

  SSL_CTX* ctx_ = nullptr;
};

}  // namespace jc::gateway
