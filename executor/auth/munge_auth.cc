#include "executor/auth/munge_auth.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/message.h>
#include <grpcpp/client_context.h>
#include <grpcpp/server_context.h>
#include <munge.h>
#include <openssl/evp.h>
#include <pwd.h>

#include <cstdlib>
#include <memory>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace jc::nexec {
namespace {

struct CtxDeleter {
  void operator()(munge_ctx_t c) const { munge_ctx_destroy(c); }
};
using Ctx = std::unique_ptr<std::remove_pointer_t<munge_ctx_t>, CtxDeleter>;

absl::StatusOr<Ctx> MakeCtx(const std::string& socket) {
  Ctx ctx(munge_ctx_create());
  if (!ctx) return absl::ResourceExhaustedError("cannot create a munge context");
  if (!socket.empty() && munge_ctx_set(ctx.get(), MUNGE_OPT_SOCKET, socket.c_str()) != EMUNGE_SUCCESS) {
    return absl::InvalidArgumentError(absl::StrCat("bad munge socket ", socket));
  }
  return ctx;
}

std::string UserName(uid_t uid) {
  passwd pw;
  passwd* out = nullptr;
  std::vector<char> buf(16384);
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &out) == 0 && out != nullptr) return out->pw_name;
  return std::to_string(uid);
}

// What a credential is bound to: the method and a digest of the request's bytes, written
// deterministically so that both ends agree whatever order map fields were set in.
std::string BindingOf(absl::string_view method, const google::protobuf::Message& request) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream out(&bytes);
    google::protobuf::io::CodedOutputStream coded(&out);
    coded.SetSerializationDeterministic(true);
    request.SerializeToCodedStream(&coded);
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &size, EVP_sha256(), nullptr);
  return absl::StrCat(method, "\n",
                      absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(digest), size)));
}

}  // namespace

std::string MungeAuth::Payload(absl::string_view method, const google::protobuf::Message& request) {
  return BindingOf(method, request);
}

MungeAuth MungeAuth::Munge(std::string socket) {
  if (socket.empty()) {
    if (const char* env = std::getenv("NEXEC_MUNGE_SOCKET"); env != nullptr) socket = env;
  }
  return MungeAuth(true, std::move(socket));
}

MungeAuth MungeAuth::Disabled() { return MungeAuth(false, ""); }

absl::StatusOr<std::string> MungeAuth::Encode(absl::string_view payload) const {
  auto ctx = MakeCtx(socket_);
  if (!ctx.ok()) return ctx.status();
  char* cred = nullptr;
  munge_err_t e = munge_encode(&cred, ctx->get(), payload.data(), static_cast<int>(payload.size()));
  if (e != EMUNGE_SUCCESS) {
    std::string why = munge_ctx_strerror(ctx->get()) ? munge_ctx_strerror(ctx->get()) : munge_strerror(e);
    return absl::UnavailableError(absl::StrCat("cannot get a munge credential (", why,
                                               "); is munged running", socket_.empty() ? "" : " at ",
                                               socket_, "?"));
  }
  std::string out(cred);
  std::free(cred);
  return out;
}

absl::StatusOr<Caller> MungeAuth::Decode(const std::string& credential, std::string* payload) const {
  auto ctx = MakeCtx(socket_);
  if (!ctx.ok()) return ctx.status();
  void* buf = nullptr;
  int len = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  munge_err_t e = munge_decode(credential.c_str(), ctx->get(), &buf, &len, &uid, &gid);
  std::string data = buf != nullptr ? std::string(static_cast<char*>(buf), static_cast<size_t>(len)) : "";
  std::free(buf);
  if (e == EMUNGE_SOCKET) {
    return absl::UnavailableError(absl::StrCat("cannot reach munged to check the caller's credential (",
                                               munge_strerror(e), ")"));
  }
  if (e != EMUNGE_SUCCESS) {
    return absl::UnauthenticatedError(absl::StrCat("the munge credential is not accepted: ", munge_strerror(e)));
  }
  if (payload != nullptr) *payload = std::move(data);
  return Caller{uid, gid, UserName(uid)};
}

absl::Status MungeAuth::Sign(grpc::ClientContext* ctx, absl::string_view method,
                             const google::protobuf::Message& request) const {
  if (!enabled_) return absl::OkStatus();
  auto cred = Encode(MungeAuth::Payload(method, request));
  if (!cred.ok()) return cred.status();
  ctx->AddMetadata(kMungeMetadataKey, *cred);
  return absl::OkStatus();
}

absl::StatusOr<Caller> MungeAuth::Verify(const grpc::ServerContext& ctx, absl::string_view method,
                                         const google::protobuf::Message& request) const {
  if (!enabled_) return Caller{0, 0, "root"};
  const auto& md = ctx.client_metadata();
  auto it = md.find(kMungeMetadataKey);
  if (it == md.end()) {
    return absl::UnauthenticatedError(
        "the call carries no munge credential (nexec proves who you are with munge; is munged running "
        "on your host, with the cluster's key?)");
  }
  std::string payload;
  auto caller = Decode(std::string(it->second.data(), it->second.size()), &payload);
  if (!caller.ok()) return caller.status();
  if (payload != MungeAuth::Payload(method, request)) {
    return absl::UnauthenticatedError("the munge credential was made for another request");
  }
  return caller;
}

absl::StatusOr<MungeAuth> MungeAuthFromFlags(const std::string& mode, const std::string& socket) {
  if (mode == "munge") return MungeAuth::Munge(socket);
  if (mode == "none") return MungeAuth::Disabled();
  return absl::InvalidArgumentError(absl::StrCat("--auth must be munge or none, got \"", mode, "\""));
}

}  // namespace jc::nexec
