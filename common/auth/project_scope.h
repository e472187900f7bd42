#pragma once

// What belongs to a project (SPEC C6): jobs, and the images and datasets registered for
// it. An image or dataset with no project belongs to the whole federation: every caller
// reads it and only admins change it. A project's own object is read by its viewers,
// changed by its members, and is "not found" to everyone else, exactly as one that does
// not exist. Decided on the object as stored, never on request fields.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/auth/principal.h"

namespace jc::auth {

// Fills `project` for a new object: the caller's only project where it is a member when it
// names none (admins naming none register for the whole federation). PermissionDenied
// unless the caller is a member of the project; `what` names the object ("an image").
absl::Status AdmitProjectObject(const Principal& caller, std::string* project, absl::string_view what);

// NotFound (with `not_found`) when the caller may not see an object of `project`;
// PermissionDenied when it sees it but its role is below `need` (a federation-wide
// object: below admin for any change).
absl::Status CheckProjectObject(const Principal& caller, const std::string& project, ProjectRole need,
                                const std::string& not_found);

// Whether objects of `project` are visible to the caller at all.
bool MaySee(const Principal& caller, const std::string& project);

// The projects whose objects the caller may list; nullopt: all (admins). Federation-wide
// objects (project "") are visible to everyone and not listed here.
std::optional<std::vector<std::string>> VisibleProjects(const Principal& caller);

// Of the objects sharing one name (ids and dataset names are unique only within a project),
// the one a caller who named no project means: the one of a project it sees, else the
// federation's. InvalidArgument when it sees one in several projects (naming `what`), and
// NotFound (`not_found`) when none is visible. T has project().
template <typename T>
absl::StatusOr<T> PickVisible(const Principal& caller, std::vector<T> all, const std::string& what,
                              const std::string& not_found) {
  std::vector<T*> own;
  T* federation = nullptr;
  for (T& o : all) {
    if (o.project().empty()) {
      federation = &o;
    } else if (MaySee(caller, o.project())) {
      own.push_back(&o);
    }
  }
  if (own.size() > 1) {
    std::vector<std::string> names;
    for (const T* o : own) names.push_back(o->project());
    return absl::InvalidArgumentError(absl::StrCat(what, " is in several projects ", caller.name, " sees (",
                                                   absl::StrJoin(names, ", "),
                                                   "): name its project (\"-\": the federation's)"));
  }
  if (own.empty() && federation == nullptr) return absl::NotFoundError(not_found);
  return std::move(own.empty() ? *federation : *own.front());
}

}  // namespace jc::auth
