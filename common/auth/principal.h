#pragma once

// Who a call runs as (SPEC C6): established once per call at the edge (the gRPC auth
// interceptor, from the Authorization header the gateway forwards) and carried in the
// call's context, never taken from a body field a caller can set.

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace jc::auth {

// A user's role in a project, weakest first (the values of jointcloud.v1.ProjectRole).
enum class ProjectRole { kNone = 0, kViewer = 1, kMember = 2, kOwner = 3 };

struct Principal {
  enum class Kind { kUser, kService };

  std::string name;
  Kind kind = Kind::kUser;
  // "token", "oidc", "service", or "none" when authentication is turned off.
  std::string auth_method;
  std::string token_id;  // the API token that authenticated the call, if one did
  // Whether the caller is the stored user `name` itself: an API token of that user, or an
  // OIDC identity whose stored user of the same name accepts OIDC. An OIDC identity that
  // merely carries a stored user's name is not (issue 44, hole 1): what only a stored user
  // may do with its own record (its API tokens) is decided by this, never by the name.
  bool stored_user = false;
  bool federation_admin = false;
  std::map<std::string, ProjectRole> projects;
  std::vector<std::string> operator_of;  // centers this user operates

  // Jointcloud's own services act for the federation; so does an admin.
  bool IsAdmin() const { return federation_admin || kind == Kind::kService; }

  ProjectRole RoleIn(const std::string& project) const {
    if (IsAdmin()) return ProjectRole::kOwner;
    auto it = projects.find(project);
    return it == projects.end() ? ProjectRole::kNone : it->second;
  }
  bool HasRole(const std::string& project, ProjectRole at_least) const {
    return RoleIn(project) >= at_least;
  }
  bool Operates(const std::string& center) const {
    if (IsAdmin()) return true;
    for (const auto& c : operator_of) {
      if (c == center) return true;
    }
    return false;
  }
};

inline absl::Status NeedAdmin(const Principal& p, const std::string& what) {
  if (p.IsAdmin()) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat(what, " needs a federation admin; ", p.name, " is not one"));
}

inline absl::Status NeedOperator(const Principal& p, const std::string& center, const std::string& what) {
  if (p.Operates(center)) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(what, " needs a federation admin or an operator of center \"",
                                                  center, "\"; ", p.name, " is neither"));
}

}  // namespace jc::auth
