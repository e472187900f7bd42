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

}  // namespace jc::auth
