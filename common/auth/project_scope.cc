#include "common/auth/project_scope.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace jc::auth {

absl::Status AdmitProjectObject(const Principal& caller, std::string* project, absl::string_view what) {
  if (project->empty()) {
    if (caller.IsAdmin()) return absl::OkStatus();  // the federation's own
    std::vector<std::string> mine;
    for (const auto& [name, role] : caller.projects) {
      if (role >= ProjectRole::kMember) mine.push_back(name);
    }
    if (mine.size() != 1) {
      return mine.empty()
                 ? absl::PermissionDeniedError(absl::StrCat(caller.name, " is a member of no project, so cannot register ",
                                                            what, "; federation-wide ones are an admin's"))
                 : absl::InvalidArgumentError(absl::StrCat("name the project of ", what, ": ", caller.name,
                                                           " is a member of ", absl::StrJoin(mine, ", ")));
    }
    *project = mine.front();
  }
  if (!caller.HasRole(*project, ProjectRole::kMember)) {
    return absl::PermissionDeniedError(
        absl::StrCat(caller.name, " is not a member of project \"", *project, "\" and cannot register ", what, " for it"));
  }
  return absl::OkStatus();
}

absl::Status CheckProjectObject(const Principal& caller, const std::string& project, ProjectRole need,
                                const std::string& not_found) {
  if (project.empty()) {
    if (need <= ProjectRole::kViewer || caller.IsAdmin()) return absl::OkStatus();
    return absl::PermissionDeniedError(
        absl::StrCat("changing what belongs to the whole federation needs a federation admin; ", caller.name,
                     " is not one (a project's members change their project's own)"));
  }
  ProjectRole held = caller.RoleIn(project);
  if (held < ProjectRole::kViewer) return absl::NotFoundError(not_found);
  if (held < need) {
    return absl::PermissionDeniedError(
        absl::StrCat(caller.name, " may read but not change what belongs to project \"", project, "\" (a member may)"));
  }
  return absl::OkStatus();
}

bool MaySee(const Principal& caller, const std::string& project) {
  return project.empty() || caller.RoleIn(project) >= ProjectRole::kViewer;
}

std::optional<std::vector<std::string>> VisibleProjects(const Principal& caller) {
  if (caller.IsAdmin()) return std::nullopt;
  std::vector<std::string> visible;
  for (const auto& [project, role] : caller.projects) {
    if (role >= ProjectRole::kViewer) visible.push_back(project);
  }
  return visible;
}

}  // namespace jc::auth
