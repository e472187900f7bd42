#pragma once

// TLS for the control plane's REST and gRPC servers and mutual TLS between its processes
// (SPEC C6). One certificate and key per process, and the CA that signs every process's
// certificate: servers ask callers for a client certificate and verify the ones they get;
// Jointcloud's own channels present theirs and verify the server's against the CA.
// scripts/dev-ca.sh makes a development CA and certificates.

#include <memory>
#include <string>

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include "absl/status/statusor.h"

namespace jc::auth {

struct TlsFiles {
  std::string cert;  // PEM certificate (chain) of this process
  std::string key;   // its PEM private key
  std::string ca;    // PEM CA certificates that sign peers (and this process's certificate)
  bool enabled() const { return !cert.empty() || !key.empty() || !ca.empty(); }
};

struct TlsMaterial {
  TlsFiles files;
  std::string cert_pem, key_pem, ca_pem;
};

// Reads the three files; InvalidArgument names a missing or unreadable one.
absl::StatusOr<std::shared_ptr<const TlsMaterial>> LoadTls(const TlsFiles& files);

// TLS server credentials (client certificates requested and verified when presented), or
// insecure ones when `tls` is null.
std::shared_ptr<grpc::ServerCredentials> ServerCredentials(const TlsMaterial* tls);
// TLS channel credentials presenting this process's certificate, or insecure ones.
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(const TlsMaterial* tls);

}  // namespace jc::auth
