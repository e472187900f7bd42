#pragma once

// How jcctl prints what the server answered: a table for people (the default), or the
// data itself as JSON or YAML for scripts (-o json|yaml), or the table's rows as CSV for
// spreadsheets (-o csv).

#include <functional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace jc::jcctl {

enum class Format { kTable, kJson, kYaml, kCsv };

// InvalidArgument for a format jcctl does not write.
absl::StatusOr<Format> ParseFormat(const std::string& text);

struct Column {
  std::string header;
  std::function<std::string(const nlohmann::json&)> cell;
};

// `text` as a terminal may be shown it: control characters (C0, DEL, C1) written out as
// \xNN or \uNNNN, never sent — what the server says may repeat another party's words (a
// center's name, a replica's message), and an escape sequence could clear the screen, set
// the title or the clipboard. Line breaks and tabs are kept when `keep_line_breaks`.
std::string Printable(absl::string_view text, bool keep_line_breaks);

// A column showing the field at `path` ("capacity.cpu"); "-" where it is absent.
Column Field(const std::string& header, const std::string& path);

// Rows as a table with aligned columns (a header line, then one line per row).
std::string Table(const nlohmann::json& rows, const std::vector<Column>& columns);
std::string Yaml(const nlohmann::json& value);
// Rows as CSV (RFC 4180): the headers, then one line per row; "-" cells are empty.
std::string Csv(const nlohmann::json& rows, const std::vector<Column>& columns);
// `value` in `format`: a table of `rows_of(value)` for kTable.
std::string Render(const nlohmann::json& value, Format format, const std::vector<Column>& columns,
                   const std::function<nlohmann::json(const nlohmann::json&)>& rows_of);

}  // namespace jc::jcctl
