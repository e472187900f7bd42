#include "common/store/doc_table.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/paging.h"
#include "common/status_macros.h"

namespace jc::store {
namespace {

constexpr char kTieSeparator = '\x1f';
// A descending listing's token key starts with this (an id never does: CheckId).
constexpr char kDescendingMark = '<';

// Appends `conditions` to `sql`, numbering their placeholders after `params`.
absl::Status AppendConditions(const std::vector<Condition>& conditions, std::string& sql, Params& params) {
  for (const Condition& c : conditions) {
    std::string condition = c.sql;
    for (size_t i = 0; i <= c.more.size(); ++i) {
      params.push_back(i == 0 ? c.value : c.more[i - 1]);
      auto at = condition.find("$?");
      if (at == std::string::npos) return absl::InternalError("a list condition has more values than placeholders");
      condition.replace(at, 2, absl::StrCat("$", params.size()));
    }
    absl::StrAppend(&sql, " AND ", condition);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::optional<std::string>> LoadDocText(Transaction& txn, absl::string_view table,
                                                       absl::string_view what,
                                                       const std::string& id,
                                                       absl::string_view lock_suffix) {
  JC_ASSIGN_OR_RETURN(Rows rows, txn.Query(absl::StrCat("SELECT doc FROM ", table,
                                                        " WHERE id = $1", lock_suffix),
                                           {id}));
  if (rows.empty()) return absl::NotFoundError(absl::StrCat(what, " \"", id, "\" not found"));
  return rows[0][0];
}

Condition InList(absl::string_view column, const std::vector<std::string>& values, bool or_empty) {
  Condition in{absl::StrCat("(", column, " IN ($?"), values.front()};
  for (size_t i = 1; i < values.size(); ++i) {
    in.sql += ", $?";
    in.more.push_back(values[i]);
  }
  in.sql += ")";
  if (or_empty) absl::StrAppend(&in.sql, " OR ", column, " = ''");
  in.sql += ")";
  return in;
}

void AddProjectScope(const std::optional<std::vector<std::string>>& visible, std::vector<Condition>* where) {
  if (!visible.has_value()) return;
  where->push_back(visible->empty() ? Condition{"project = $?", std::string()} : InList("project", *visible, true));
}

absl::StatusOr<DocPage> ListDocs(Store& store, absl::string_view table,
                                 const std::vector<Condition>& conditions,
                                 const std::string& page_token, int requested_page_size,
                                 absl::string_view tie_column) {
  JC_ASSIGN_OR_RETURN(int page_size, NormalizePageSize(requested_page_size));
  JC_ASSIGN_OR_RETURN(std::string after, DecodePageToken(page_token));
  const bool tie = !tie_column.empty();
  std::string sql = absl::StrCat("SELECT id, doc FROM ", table, " WHERE id > $1");
  Params params{after};
  if (tie) {
    // The token is "id<US>tie"; an id holds no unit separator (CheckId).
    std::string after_tie;
    if (auto us = after.find(kTieSeparator); us != std::string::npos) {
      after_tie = after.substr(us + 1);
      after.resize(us);
    }
    params = {after, after, after_tie};
    sql = absl::StrCat("SELECT id, doc, ", tie_column, " FROM ", table, " WHERE (id > $1 OR (id = $2 AND ",
                       tie_column, " > $3))");
  }
  if (!after.empty() && after[0] == kDescendingMark) {
    return absl::InvalidArgumentError("the page token is of a listing in the other order (newest first)");
  }
  JC_RETURN_IF_ERROR(AppendConditions(conditions, sql, params));
  // One row more than asked tells whether another page exists.
  params.push_back(int64_t{page_size + 1});
  absl::StrAppend(&sql, " ORDER BY id", tie ? absl::StrCat(", ", tie_column) : "", " LIMIT $", params.size());
  JC_ASSIGN_OR_RETURN(Rows rows, store.Query(sql, params));
  DocPage page;
  for (size_t i = 0; i < rows.size() && static_cast<int>(i) < page_size; ++i) {
    page.docs.push_back(std::move(rows[i][1]));
  }
  if (static_cast<int>(rows.size()) > page_size) {
    const auto& last = rows[page_size - 1];
    page.next_page_token =
        EncodePageToken(tie ? absl::StrCat(*last[0], std::string(1, kTieSeparator), last[2].value_or("")) : *last[0]);
  }
  return page;
}

absl::StatusOr<DocPage> ListDocsDescending(Store& store, absl::string_view table,
                                           const std::vector<Condition>& conditions,
                                           const std::string& page_token, int requested_page_size) {
  JC_ASSIGN_OR_RETURN(int page_size, NormalizePageSize(requested_page_size));
  JC_ASSIGN_OR_RETURN(std::string before, DecodePageToken(page_token));
  Params params;
  std::string sql = absl::StrCat("SELECT id, doc FROM ", table, " WHERE 1 = 1");
  if (!before.empty()) {
    if (before[0] != kDescendingMark) {
      return absl::InvalidArgumentError("the page token is of a listing in the other order (oldest first)");
    }
    params.push_back(before.substr(1));
    sql += " AND id < $1";
  }
  JC_RETURN_IF_ERROR(AppendConditions(conditions, sql, params));
  params.push_back(int64_t{page_size + 1});
  absl::StrAppend(&sql, " ORDER BY id DESC LIMIT $", params.size());
  JC_ASSIGN_OR_RETURN(Rows rows, store.Query(sql, params));
  DocPage page;
  for (size_t i = 0; i < rows.size() && static_cast<int>(i) < page_size; ++i) {
    page.docs.push_back(std::move(rows[i][1]));
  }
  if (static_cast<int>(rows.size()) > page_size) {
    page.next_page_token = EncodePageToken(absl::StrCat(std::string(1, kDescendingMark), *rows[page_size - 1][0]));
  }
  return page;
}

}  // namespace jc::store
