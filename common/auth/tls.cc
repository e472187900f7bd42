#include "common/auth/tls.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace jc::auth {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, const char* what) {
  if (path.empty()) return absl::InvalidArgumentError(absl::StrCat("TLS needs ", what, " too"));
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read the TLS ", what, " ", path));
  std::stringstream text;
  text << in.rdbuf();
  if (text.str().find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("the TLS ", what, " ", path, " is not PEM"));
  }
  return text.str();
}

}  // namespace

absl::StatusOr<std::shared_ptr<const TlsMaterial>> LoadTls(const TlsFiles& files) {
  auto tls = std::make_shared<TlsMaterial>();
  tls->files = files;
  auto cert = ReadPem(files.cert, "certificate (--tls_cert)");
  if (!cert.ok()) return cert.status();
  auto key = ReadPem(files.key, "private key (--tls_key)");
  if (!key.ok()) return key.status();
  auto ca = ReadPem(files.ca, "CA certificate (--tls_ca)");
  if (!ca.ok()) return ca.status();
  tls->cert_pem = std::move(*cert);
  tls->key_pem = std::move(*key);
  tls->ca_pem = std::move(*ca);
  return std::shared_ptr<const TlsMaterial>(std::move(tls));
}

std::shared_ptr<grpc::ServerCredentials> ServerCredentials(const TlsMaterial* tls) {
  if (tls == nullptr) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = tls->ca_pem;
  options.pem_key_cert_pairs.push_back({tls->key_pem, tls->cert_pem});
  return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(const TlsMaterial* tls) {
  if (tls == nullptr) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = tls->ca_pem;
  options.pem_private_key = tls->key_pem;
  options.pem_cert_chain = tls->cert_pem;
  return grpc::SslCredentials(options);
}

}  // namespace jc::auth
