#include "common/auth/tls.h"

#include <grpcpp/security/tls_credentials_options.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

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

// Whether the key is the certificate's (the first of the chain).
bool KeyMatches(const std::string& cert_pem, const std::string& key_pem) {
  BIO* cert_bio = BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size()));
  BIO* key_bio = BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size()));
  X509* cert = cert_bio != nullptr ? PEM_read_bio_X509(cert_bio, nullptr, nullptr, nullptr) : nullptr;
  EVP_PKEY* key = key_bio != nullptr ? PEM_read_bio_PrivateKey(key_bio, nullptr, nullptr, nullptr) : nullptr;
  bool match = cert != nullptr && key != nullptr && X509_check_private_key(cert, key) == 1;
  EVP_PKEY_free(key);
  X509_free(cert);
  BIO_free(key_bio);
  BIO_free(cert_bio);
  ERR_clear_error();
  return match;
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
  if (!KeyMatches(*cert, *key)) {
    return absl::InvalidArgumentError(absl::StrCat("the TLS certificate ", files.cert, " and private key ", files.key,
                                                   " do not make a pair (or one of them cannot be read)"));
  }
  tls->cert_pem = std::move(*cert);
  tls->key_pem = std::move(*key);
  tls->ca_pem = std::move(*ca);
  tls->provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(files.key, files.cert, files.ca,
                                                                                      kTlsReloadSeconds);
  return std::shared_ptr<const TlsMaterial>(std::move(tls));
}

// gRPC's TLS credentials over the material's file watcher (not the Ssl* ones, which take
// PEM strings once): what is on disk now is what new connections use.
std::shared_ptr<grpc::ServerCredentials> ServerCredentials(const TlsMaterial* tls,
                                                           grpc_ssl_client_certificate_request_type request) {
  if (tls == nullptr) return grpc::InsecureServerCredentials();
  grpc::experimental::TlsServerCredentialsOptions options(tls->provider);
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  options.set_cert_request_type(request);
  return grpc::experimental::TlsServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(const TlsMaterial* tls) {
  if (tls == nullptr) return grpc::InsecureChannelCredentials();
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(tls->provider);
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  options.set_verify_server_certs(true);
  return grpc::experimental::TlsCredentials(options);
}

}  // namespace jc::auth
