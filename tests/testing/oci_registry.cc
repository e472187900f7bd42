#include "tests/testing/oci_registry.h"

#include <crypt.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace jc::testing {
namespace {

constexpr char kUser[] = "jc-puller";
constexpr char kPassword[] = "pull-secret-for-tests";

// Runs argv to its end; its output goes to `log`.
absl::Status Run(std::vector<std::string> argv, const std::string& log) {
  const std::string what = argv[0];
  Process p(std::move(argv), log);
  auto code = p.Wait(std::chrono::seconds(120));
  if (!code || *code != 0) {
    return absl::InternalError(absl::StrCat(what, " failed (", code ? std::to_string(*code) : "timed out", "): ", p.Log()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<OciRegistry>> OciRegistry::Start(const std::string& dir, const std::string& source_dir) {
  std::unique_ptr<OciRegistry> r(new OciRegistry());
  r->dir_ = dir;
  r->source_dir_ = source_dir;
  std::filesystem::create_directories(dir + "/data");
  if (absl::Status s = Run({source_dir + "/scripts/dev-ca.sh", dir + "/certs", "registry"}, dir + "/dev-ca.log");
      !s.ok()) {
    return s;
  }
  // skopeo reads a directory of CAs (*.crt) and takes any *.key there for a client key.
  r->ca_dir_ = dir + "/ca";
  std::filesystem::create_directories(r->ca_dir_);
  std::filesystem::copy_file(dir + "/certs/ca.crt", r->ca_dir_ + "/ca.crt");
  r->ca_file_ = r->ca_dir_ + "/ca.crt";
  // The registry's htpasswd takes bcrypt only (libcrypt's $2b$).
  char salt[CRYPT_GENSALT_OUTPUT_SIZE];
  if (crypt_gensalt_rn("$2b$", 10, nullptr, 0, salt, sizeof(salt)) == nullptr) {
    return absl::InternalError("libcrypt makes no bcrypt salt");
  }
  crypt_data data{};
  const char* hash = crypt_r(kPassword, salt, &data);
  if (hash == nullptr || hash[0] == '*') return absl::InternalError("libcrypt makes no bcrypt hash");
  std::ofstream(dir + "/htpasswd") << kUser << ":" << hash << "\n";
  std::ofstream(dir + "/config.yml") << "version: 0.1\n"
                                     << "log:\n  level: info\n"
                                     << "storage:\n  filesystem:\n    rootdirectory: " << dir << "/data\n"
                                     << "  delete:\n    enabled: true\n"
                                     << "http:\n  addr: 127.0.0.1:0\n  tls:\n    certificate: " << dir
                                     << "/certs/registry.crt\n    key: " << dir << "/certs/registry.key\n"
                                     << "auth:\n  htpasswd:\n    realm: jointcloud-tests\n    path: " << dir
                                     << "/htpasswd\n";
  r->server_ = std::make_unique<Process>(std::vector<std::string>{"/usr/bin/docker-registry", "serve", dir + "/config.yml"},
                                         dir + "/registry.log");
  auto port = r->server_->WaitForLog("listening on 127\\.0\\.0\\.1:([0-9]+)");
  if (!port) return absl::UnavailableError(absl::StrCat("docker-registry did not start: ", r->server_->Log()));
  r->host_ = absl::StrCat("127.0.0.1:", *port);
  r->auth_file_ = dir + "/auth.json";
  std::ofstream(r->auth_file_) << "{\"auths\": {\"" << r->host_ << "\": {\"auth\": \""
                               << absl::Base64Escape(absl::StrCat(kUser, ":", kPassword)) << "\"}}}\n";
  return r;
}

absl::StatusOr<std::string> OciRegistry::Push(const std::string& repository, const std::string& tag,
                                              const std::string& text, const std::string& arch) {
  return PushImage(repository, tag, text, arch, {});
}

absl::StatusOr<std::string> OciRegistry::PushWith(const std::string& repository, const std::string& tag,
                                                  const std::string& text, const std::vector<std::string>& env) {
  return PushImage(repository, tag, text, "amd64", env);
}

absl::StatusOr<std::string> OciRegistry::PushImage(const std::string& repository, const std::string& tag,
                                                   const std::string& text, const std::string& arch,
                                                   const std::vector<std::string>& env) {
  const std::string layout = absl::StrCat(dir_, "/image-", ++pushes_);
  const std::string log = layout + ".log";
  std::vector<std::string> make{"/usr/bin/env"};
  make.insert(make.end(), env.begin(), env.end());
  make.insert(make.end(), {source_dir_ + "/tests/testing/make-oci-image.sh", layout, tag, text, arch});
  if (absl::Status s = Run(make, log); !s.ok()) return s;
  std::ifstream in(log);
  std::string digest, line;
  while (std::getline(in, line)) {
    if (line.rfind("sha256:", 0) == 0) digest = line;
  }
  if (absl::Status s = Run({"/usr/bin/skopeo", "copy", "--quiet", "--dest-cert-dir", ca_dir_, "--dest-creds",
                            absl::StrCat(kUser, ":", kPassword), absl::StrCat("oci:", layout, ":", tag),
                            absl::StrCat("docker://", host_, "/", repository, ":", tag)},
                           layout + ".push.log");
      !s.ok()) {
    return s;
  }
  return digest;
}

absl::StatusOr<std::string> OciRegistry::PushLayout(const std::string& layout, const std::string& layout_tag,
                                                    const std::string& repository, const std::string& tag) {
  const std::string digest_file = absl::StrCat(dir_, "/push-", ++pushes_, ".digest");
  if (absl::Status s = Run({"/usr/bin/skopeo", "copy", "--quiet", "--dest-cert-dir", ca_dir_, "--dest-creds",
                            absl::StrCat(kUser, ":", kPassword), "--digestfile", digest_file,
                            absl::StrCat("oci:", layout, ":", layout_tag),
                            absl::StrCat("docker://", host_, "/", repository, ":", tag)},
                           digest_file + ".log");
      !s.ok()) {
    return s;
  }
  std::ifstream in(digest_file);
  std::string digest;
  std::getline(in, digest);
  if (digest.rfind("sha256:", 0) != 0) return absl::InternalError("skopeo wrote no digest to " + digest_file);
  return digest;
}

}  // namespace jc::testing
