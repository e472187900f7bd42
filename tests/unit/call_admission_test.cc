// The one decision every call of the control plane passes, over gRPC or called directly by
// the REST gateway (ADR 0014): attacks found against the direct calls (helper-44), as unit
// tests of the decision itself.

#include <catch2/catch.hpp>
#include <memory>
#include <random>
#include <vector>

#include "absl/strings/match.h"
#include "common/audit/audit_log.h"
#include "common/auth/rate_limiter.h"
#include "common/clock.h"
#include "common/store/store.h"
#include "common/auth/call_admission.h"
#include "common/utf8.h"
#include "tests/testing/random_message.h"
#include "jointcloud/v1/catalog.pb.h"
#include "jointcloud/v1/jobs.pb.h"

namespace {

using jc::auth::Principal;

// "Bearer secret" is Jointcloud's service secret, "Bearer alice" a user.
class FixedAuthenticator final : public jc::auth::Authenticator {
 public:
  absl::StatusOr<Principal> Authenticate(absl::string_view authorization) const override {
    Principal p;
    if (authorization == "Bearer secret") {
      p.name = "jointcloud";
      p.kind = Principal::Kind::kService;
      p.auth_method = "service";
      return p;
    }
    if (authorization == "Bearer alice") {
      p.name = "alice";
      p.auth_method = "token";
      return p;
    }
    return absl::UnauthenticatedError("proves no one");
  }
};

constexpr char kStop[] = "/jointcloud.v1.JobService/StopTrainJob";

jc::auth::CallAdmission Admission() {
  auto access = std::make_shared<jc::auth::MethodAccess>();
  (*access)[kStop] = {jc::auth::Access::kAuthenticated, true};
  return jc::auth::CallAdmission(std::make_shared<FixedAuthenticator>(), access, nullptr, nullptr,
                                 /*service_needs_certificate=*/true);
}

}  // namespace

TEST_CASE("the service secret never counts for a call made for a REST request, even when the client's address is "
          "gone [C6]",
          "[C6]") {
  auto admission = Admission();
  // A REST client that reset its connection before the gateway asked for its address.
  auto gone = admission.Decide({kStop, "Bearer secret", "", "r1", nullptr, /*via_rest=*/true});
  REQUIRE_FALSE(gone.caller.ok());
  CHECK(absl::IsUnauthenticated(gone.caller.status()));
  CHECK(absl::StrContains(gone.caller.status().message(), "not accepted over REST"));
  auto with_address = admission.Decide({kStop, "Bearer secret", "127.0.0.1", "r2", nullptr, true});
  CHECK(absl::IsUnauthenticated(with_address.caller.status()));
  // This process's own services calling each other in process: the secret is theirs.
  auto own = admission.Decide({kStop, "Bearer secret", "", "", nullptr, /*via_rest=*/false});
  REQUIRE(own.caller.ok());
  CHECK((*own.caller)->kind == Principal::Kind::kService);
  // A user through REST is who the token says, with or without an address.
  auto user = admission.Decide({kStop, "Bearer alice", "", "r3", nullptr, true});
  REQUIRE(user.caller.ok());
  CHECK((*user.caller)->name == "alice");
}

TEST_CASE("a request handed to a handler directly is refused when a string in it is not UTF-8, naming the field "
          "[C6][C5]",
          "[C6][C5]") {
  jointcloud::v1::CreateTrainJobRequest req;
  req.set_name("fine");
  req.add_tasks()->set_command("echo ok");
  CHECK(jc::auth::CheckStringsAreUtf8(req).ok());
  req.set_idempotency_key("k\xff" "2");
  auto bad = jc::auth::CheckStringsAreUtf8(req);
  CHECK(absl::IsInvalidArgument(bad));
  CHECK(bad.message() == "idempotency_key: not UTF-8 text");
  req.clear_idempotency_key();
  req.mutable_tasks(0)->set_command("\xed\xa0\x80");  // a surrogate
  CHECK(jc::auth::CheckStringsAreUtf8(req).message() == "tasks.command: not UTF-8 text");
  // In a repeated string of a later element, and in a map's key or value: every string is
  // looked at, wherever it is (the walk visits only what can hold one, worked out per type).
  req.mutable_tasks(0)->set_command("echo ok");
  req.add_tasks()->add_center_ids("alpha");
  req.mutable_tasks(1)->add_center_ids("\xc0\xaf");
  CHECK(jc::auth::CheckStringsAreUtf8(req).message() == "tasks.center_ids: not UTF-8 text");
  jointcloud::v1::ResourceSpec spec;
  (*spec.mutable_resource_quantity())["cpu"] = "1";
  CHECK(jc::auth::CheckStringsAreUtf8(spec).ok());
  (*spec.mutable_resource_quantity())["memory"] = "\xff";
  CHECK(jc::auth::CheckStringsAreUtf8(spec).message() == "resource_quantity.value: not UTF-8 text");
  spec.clear_resource_quantity();
  (*spec.mutable_resource_quantity())["\xfe"] = "1";
  CHECK(jc::auth::CheckStringsAreUtf8(spec).message() == "resource_quantity.key: not UTF-8 text");
}

TEST_CASE("an audit row holds UTF-8 whatever the caller sent, so every page of the log can be answered [C6]",
          "[C6]") {
  jointcloud::v1::AuditRecord r;
  r.set_request_id("evil\xff\xfe");
  r.set_object("job_id=\xc0\xaf");
  r.set_message("job \"\xf4\x90\x80\x80\" not found");
  r.set_actor("alice");
  auto values = jc::audit::AuditLog::Values(r);
  for (const auto& v : values) {
    if (const auto* text = std::get_if<std::string>(&v)) CHECK(jc::IsUtf8(*text));
  }
  CHECK(std::get<std::string>(values[2]) == "alice");
  CHECK(std::get<std::string>(values[9]) == "evil\xef\xbf\xbd\xef\xbf\xbd");
  CHECK(jc::ToUtf8("a\xe2\x82") == "a\xef\xbf\xbd\xef\xbf\xbd");
  CHECK(jc::ToUtf8("h\xc3\xa9 \xf0\x9f\x98\x80") == "h\xc3\xa9 \xf0\x9f\x98\x80");
}

TEST_CASE("a user refused for its rate or for an admin's method is audited by name, not as an unproven claim [C6]",
          "[C6]") {
  jc::FakeClock clock{absl::Now()};
  auto access = std::make_shared<jc::auth::MethodAccess>();
  (*access)[kStop] = {jc::auth::Access::kAuthenticated, true};
  (*access)["/jointcloud.v1.RegistryService/CreateCenter"] = {jc::auth::Access::kAdmin, true};
  auto store = jc::store::OpenStore("sqlite::memory:");
  REQUIRE(store.ok());
  auto audit = std::make_shared<jc::audit::AuditLog>(store->get(), &clock);
  jc::auth::CallAdmission admission(std::make_shared<FixedAuthenticator>(), access,
                                    std::make_shared<jc::auth::RateLimiter>(jc::auth::RateLimit{1, 1}, &clock), audit);
  auto first = admission.Decide({kStop, "Bearer alice", "127.0.0.1", "r1", nullptr, true});
  REQUIRE(first.caller.ok());
  auto limited = admission.Decide({kStop, "Bearer alice", "127.0.0.1", "r2", nullptr, true});
  REQUIRE_FALSE(limited.caller.ok());
  CHECK(absl::IsResourceExhausted(limited.caller.status()));
  REQUIRE(limited.audit != nullptr);
  CHECK(limited.audit->record.actor() == "alice");
  CHECK(limited.audit->record.auth_method() == "token");
  clock.Advance(absl::Seconds(5));
  auto admin_only = admission.Decide({"/jointcloud.v1.RegistryService/CreateCenter", "Bearer alice", "", "r3",
                                      nullptr, true});
  CHECK(absl::IsPermissionDenied(admin_only.caller.status()));
  CHECK(admin_only.audit->record.actor() == "alice");
  auto nobody = admission.Decide({kStop, "Bearer mallory", "", "r4", nullptr, true});
  CHECK(nobody.audit->record.actor() == "(unproven) bearer");
}

namespace {

namespace pb = google::protobuf;

// Every string of `m` (maps' keys and values included), as (message, field, index).
struct StringSlot {
  pb::Message* message;
  const pb::FieldDescriptor* field;
  int index;  // -1: a singular field
};
void StringSlots(pb::Message* m, std::vector<StringSlot>* out) {
  const pb::Reflection* r = m->GetReflection();
  std::vector<const pb::FieldDescriptor*> fields;
  r->ListFields(*m, &fields);
  for (const pb::FieldDescriptor* f : fields) {
    const int n = f->is_repeated() ? r->FieldSize(*m, f) : 1;
    for (int i = 0; i < n; ++i) {
      if (f->type() == pb::FieldDescriptor::TYPE_STRING) {
        out->push_back({m, f, f->is_repeated() ? i : -1});
      } else if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
        StringSlots(f->is_repeated() ? r->MutableRepeatedMessage(m, f, i) : r->MutableMessage(m, f), out);
      }
    }
  }
}

}  // namespace

TEST_CASE("every string of every message of the API is looked at: one that is not UTF-8, wherever it is, is refused "
          "[C6][C5]",
          "[C6][C5]") {
  auto messages = jc::testing::ApiMessages();
  REQUIRE(messages.size() > 100);
  std::mt19937 rng(75);
  int refused = 0;
  uint32_t seed = 1;
  for (const pb::Descriptor* d : messages) {
    for (int round = 0; round < 10; ++round) {
      std::unique_ptr<pb::Message> m(pb::MessageFactory::generated_factory()->GetPrototype(d)->New());
      jc::testing::Filler(seed++).Fill(m.get());
      INFO(d->full_name() << "\n" << m->DebugString());
      REQUIRE(jc::auth::CheckStringsAreUtf8(*m).ok());  // the filler writes UTF-8 text
      std::vector<StringSlot> slots;
      StringSlots(m.get(), &slots);
      if (slots.empty()) continue;
      const StringSlot& s = slots[std::uniform_int_distribution<size_t>(0, slots.size() - 1)(rng)];
      const pb::Reflection* r = s.message->GetReflection();
      std::string value = s.index < 0 ? r->GetString(*s.message, s.field)
                                      : r->GetRepeatedString(*s.message, s.field, s.index);
      value.insert(value.size() / 2, "\xc0\xaf");  // an overlong '/'
      if (s.index < 0) {
        r->SetString(s.message, s.field, value);
      } else {
        r->SetRepeatedString(s.message, s.field, s.index, value);
      }
      absl::Status checked = jc::auth::CheckStringsAreUtf8(*m);
      INFO("spoiled " << s.field->full_name());
      CHECK(absl::IsInvalidArgument(checked));
      CHECK(absl::EndsWith(checked.message(), s.field->name() + ": not UTF-8 text"));
      ++refused;
    }
  }
  CHECK(refused > static_cast<int>(messages.size()) * 3);
}
