#pragma once

// TLS for the control plane's REST and gRPC servers and mutual TLS between its processes
// (SPEC C6). One certificate and key per process, and the CA that signs every process's
// certificate: servers ask callers for a client certificate and verify the ones they get;
// Jointcloud's own channels present theirs and verify the server's against the CA.
// scripts/dev-ca.sh makes a development CA and certificates.

#include <memory>
#include <string>

#include <grpc/grpc_security_constants.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>

#include "absl/status/statusor.h"

namespace jc::auth {

struct TlsFiles {
  std::string cert;  // PEM certificate (chain) of this process
  std::string key;   // its PEM private key
  std::string ca;    // PEM CA certificates that sign peers (and this process's certificate)
  bool enabled() const { return !cert.empty() || !key.empty() || !ca.empty(); }
};

// How often the files are looked at again: a certificate, key or CA replaced on disk is
// used for new connections within this many seconds, without a restart (rotation).
constexpr unsigned kTlsReloadSeconds = 10;

struct TlsMaterial {
  TlsFiles files;
  std::string cert_pem, key_pem, ca_pem;  // as read at start (checked to be PEM)
  // Watches the three files and hands gRPC what they hold now; shared by every
  // credential made from this material.
  std::shared_ptr<grpc::experimental::CertificateProviderInterface> provider;
};

// Reads the three files; InvalidArgument names a missing or unreadable one.
absl::StatusOr<std::shared_ptr<const TlsMaterial>> LoadTls(const TlsFiles& files);

// TLS server credentials (client certificates requested and verified when presented, or
// required with `request`), or insecure ones when `tls` is null.
std::shared_ptr<grpc::ServerCredentials> ServerCredentials(
    const TlsMaterial* tls, grpc_ssl_client_certificate_request_type request = GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
// TLS channel credentials presenting this process's certificate, or insecure ones.
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(const TlsMaterial* tls);

}  // namespace jc::auth
