#include "tests/testing/fake_registry.h"

#include <openssl/evp.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "tests/testing/process.h"

namespace jc::testing {
namespace {

std::string Digest(const std::string& data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  return absl::StrCat("sha256:", absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(md), len)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<FakeRegistry>> FakeRegistry::Start(const std::string& dir, const std::string& source_dir,
                                                                   bool tls) {
  std::unique_ptr<FakeRegistry> r(new FakeRegistry());
  r->dir_ = dir;
  std::filesystem::create_directories(dir);
  r->ca_file_ = dir + "/ca.crt";
  if (!std::filesystem::exists(dir + "/fake-registry.crt")) {
    Process ca({source_dir + "/scripts/dev-ca.sh", dir, "fake-registry"}, dir + "/dev-ca.log");
    auto code = ca.Wait(std::chrono::seconds(60));
    if (!code || *code != 0) return absl::InternalError(absl::StrCat("dev-ca.sh failed: ", ca.Log()));
  }
  if (tls) {
    r->server_ = std::make_unique<httplib::SSLServer>((dir + "/fake-registry.crt").c_str(),
                                                      (dir + "/fake-registry.key").c_str());
  } else {
    r->server_ = std::make_unique<httplib::Server>();
  }
  if (!r->server_->is_valid()) return absl::InternalError("the fake registry's server is not valid (certificates?)");
  // Enough threads for every connection a test holds open at once (dripping ones included).
  r->server_->new_task_queue = [] { return new httplib::ThreadPool(96); };
  FakeRegistry* self = r.get();
  r->server_->set_pre_routing_handler([self](const httplib::Request& req, httplib::Response& res) {
    Gate gate;
    {
      std::lock_guard<std::mutex> lock(self->mu_);
      self->seen_.push_back({req.path, req.get_header_value("Authorization")});
      gate = self->gate_;
    }
    return gate && gate(req, res) ? httplib::Server::HandlerResponse::Handled
                                  : httplib::Server::HandlerResponse::Unhandled;
  });
  r->port_ = r->server_->bind_to_any_port("127.0.0.1");
  if (r->port_ <= 0) return absl::InternalError("the fake registry cannot bind 127.0.0.1");
  r->thread_ = std::thread([self] { self->server_->listen_after_bind(); });
  if (!WaitUntil([&] { return self->server_->is_running(); }, std::chrono::seconds(10))) {
    return absl::InternalError("the fake registry did not start");
  }
  return r;
}

FakeRegistry::~FakeRegistry() {
  stopping_ = true;
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

std::vector<FakeRegistry::Seen> FakeRegistry::seen() const {
  std::lock_guard<std::mutex> lock(mu_);
  return seen_;
}

std::string FakeRegistry::AddImage(const std::string& repository, const std::string& tag, const std::string& platform) {
  const std::string os = platform.substr(0, platform.find('/'));
  const std::string arch = platform.substr(platform.find('/') + 1);
  const std::string config = absl::StrCat(R"({"os":")", os, R"(","architecture":")", arch, R"(","rootfs":{"type":"layers","diff_ids":[]}})");
  const std::string config_digest = Digest(config);
  const std::string manifest = absl::StrCat(
      R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":")",
      config_digest, R"(","size":)", config.size(), R"(},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:)",
      std::string(64, 'a'), R"(","size":1048576}]})");
  const std::string digest = Digest(manifest);
  auto serve = [](std::string body, std::string type, std::string digest) {
    return [body, type, digest](const httplib::Request&, httplib::Response& res) {
      res.set_header("Docker-Content-Digest", digest);
      res.set_content(body, type.c_str());
    };
  };
  const std::string base = "/v2/" + repository;
  server_->Get(base + "/manifests/" + tag, serve(manifest, "application/vnd.oci.image.manifest.v1+json", digest));
  server_->Get(base + "/manifests/" + digest, serve(manifest, "application/vnd.oci.image.manifest.v1+json", digest));
  server_->Get(base + "/blobs/" + config_digest, serve(config, "application/octet-stream", config_digest));
  return digest;
}

std::string FakeRegistry::WriteAuthFile(const std::string& user, const std::string& password) const {
  const std::string path = absl::StrCat(dir_, "/auth-", port_, ".json");
  std::ofstream(path) << "{\"auths\": {\"" << host() << "\": {\"auth\": \""
                      << absl::Base64Escape(absl::StrCat(user, ":", password)) << "\"}}}\n";
  return path;
}

}  // namespace jc::testing
