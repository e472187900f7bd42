#pragma once

// Helpers for tables that keep one resource per row as a JSON document next to an `id`
// key and the columns that lists filter on.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/store/doc.h"
#include "common/store/store.h"

namespace jc::store {

// Reads the document with `id`; NotFound says "<what> "<id>" not found".
absl::StatusOr<std::optional<std::string>> LoadDocText(Transaction& txn, absl::string_view table,
                                                       absl::string_view what,
                                                       const std::string& id,
                                                       absl::string_view lock_suffix);

template <typename Message>
absl::StatusOr<Message> LoadDoc(Transaction& txn, absl::string_view table, absl::string_view what,
                                const std::string& id, absl::string_view lock_suffix = "") {
  auto text = LoadDocText(txn, table, what, id, lock_suffix);
  if (!text.ok()) return text.status();
  return DecodeDoc<Message>(*text);
}

// A filter of a list: `sql` holds "$?" where the value's placeholder goes,
// e.g. {"region = $?", "north"}; a condition of several values ("project IN ($?, $?)")
// has the first in `value` and the others, in order, in `more`.
struct Condition {
  std::string sql;
  SqlValue value;
  std::vector<SqlValue> more = {};
};

// `column IN (values...)`, or `column = ''` when `or_empty` too (objects of no project,
// the federation's, next to the caller's projects'). `values` must not be empty.
Condition InList(absl::string_view column, const std::vector<std::string>& values, bool or_empty = false);

// Limits a list to the rows of `visible` projects and of no project (column `project`
// is '': the federation's); nullopt: every row (an admin's list).
void AddProjectScope(const std::optional<std::vector<std::string>>& visible, std::vector<Condition>* where);

struct DocPage {
  std::vector<std::optional<std::string>> docs;
  std::string next_page_token;
};

// One page of documents ordered by id, after the page token, matching every condition.
// `tie_column`: a table whose key is (id, tie_column) — ids unique only within it, as
// images within a project — orders by both, and its page tokens hold both.
absl::StatusOr<DocPage> ListDocs(Store& store, absl::string_view table,
                                 const std::vector<Condition>& conditions,
                                 const std::string& page_token, int requested_page_size,
                                 absl::string_view tie_column = "");
// The same, highest id first (a table whose ids grow with time: newest first). Its page
// tokens are its own: one of the other order is refused.
absl::StatusOr<DocPage> ListDocsDescending(Store& store, absl::string_view table,
                                           const std::vector<Condition>& conditions,
                                           const std::string& page_token, int requested_page_size);

}  // namespace jc::store
