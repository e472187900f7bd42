#include "tools/jcctl/output.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace jc::jcctl {

using nlohmann::json;

namespace {

std::string Scalar(const json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>().empty() ? "-" : v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  if (v.is_array()) {
    std::string out;
    for (const auto& item : v) absl::StrAppend(&out, out.empty() ? "" : ",", Scalar(item));
    return out.empty() ? "-" : out;
  }
  return v.dump();
}

void Emit(YAML::Emitter& out, const json& v) {
  if (v.is_object()) {
    out << YAML::BeginMap;
    for (const auto& [key, item] : v.items()) {
      out << YAML::Key << key << YAML::Value;
      Emit(out, item);
    }
    out << YAML::EndMap;
  } else if (v.is_array()) {
    out << YAML::BeginSeq;
    for (const auto& item : v) Emit(out, item);
    out << YAML::EndSeq;
  } else if (v.is_string()) {
    out << YAML::DoubleQuoted << v.get<std::string>();
  } else if (v.is_null()) {
    out << YAML::Null;
  } else if (v.is_boolean()) {
    out << v.get<bool>();
  } else {
    out << v.dump();
  }
}

}  // namespace

std::string Printable(absl::string_view text, bool keep_line_breaks) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
        static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
      absl::StrAppend(&out, absl::StrFormat("\\u%04x", static_cast<unsigned char>(text[++i])));
    } else if ((c < 0x20 && !(keep_line_breaks && (c == '\n' || c == '\t'))) || c == 0x7f) {
      absl::StrAppend(&out, absl::StrFormat("\\x%02x", c));
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

absl::StatusOr<Format> ParseFormat(const std::string& text) {
  if (text.empty() || text == "table" || text == "wide") return Format::kTable;
  if (text == "json") return Format::kJson;
  if (text == "yaml") return Format::kYaml;
  if (text == "csv") return Format::kCsv;
  return absl::InvalidArgumentError(absl::StrCat("output: \"", text, "\" is not a format (table, json, yaml, csv)"));
}

Column Field(const std::string& header, const std::string& path) {
  std::vector<std::string> parts = absl::StrSplit(path, '.');
  return {header, [parts](const json& row) {
            const json* at = &row;
            for (const auto& p : parts) {
              if (!at->is_object() || !at->contains(p)) return std::string("-");
              at = &(*at)[p];
            }
            return Scalar(*at);
          }};
}

std::string Table(const json& rows, const std::vector<Column>& columns) {
  std::vector<std::vector<std::string>> cells;
  std::vector<std::string> header;
  for (const auto& c : columns) header.push_back(c.header);
  cells.push_back(header);
  if (rows.is_array()) {
    for (const auto& row : rows) {
      std::vector<std::string> line;
      for (const auto& c : columns) line.push_back(Printable(c.cell(row), /*keep_line_breaks=*/false));
      cells.push_back(std::move(line));
    }
  }
  std::vector<size_t> width(columns.size(), 0);
  for (const auto& line : cells) {
    for (size_t i = 0; i < line.size(); ++i) width[i] = std::max(width[i], line[i].size());
  }
  std::string out;
  for (const auto& line : cells) {
    std::string text;
    for (size_t i = 0; i < line.size(); ++i) {
      text += line[i];
      if (i + 1 < line.size()) text += std::string(width[i] - line[i].size() + 3, ' ');
    }
    out += text + "\n";
  }
  return out;
}

std::string Csv(const json& rows, const std::vector<Column>& columns) {
  auto quote = [](std::string cell) {
    if (cell == "-") return std::string();
    if (cell.find_first_of(",\"\n\r") == std::string::npos) return cell;
    std::string out = "\"";
    for (char ch : cell) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    return out + "\"";
  };
  std::string out;
  for (size_t i = 0; i < columns.size(); ++i) absl::StrAppend(&out, i ? "," : "", quote(columns[i].header));
  out += "\n";
  if (rows.is_array()) {
    for (const auto& row : rows) {
      for (size_t i = 0; i < columns.size(); ++i) {
        absl::StrAppend(&out, i ? "," : "", quote(Printable(columns[i].cell(row), /*keep_line_breaks=*/true)));
      }
      out += "\n";
    }
  }
  return out;
}

std::string Yaml(const json& value) {
  YAML::Emitter out;
  Emit(out, value);
  return std::string(out.c_str()) + "\n";
}

std::string Render(const json& value, Format format, const std::vector<Column>& columns,
                   const std::function<json(const json&)>& rows_of) {
  switch (format) {
    case Format::kJson: return value.dump(2) + "\n";
    case Format::kYaml: return Yaml(value);
    case Format::kCsv:
      // Only tables have rows to put in columns; anything else is its JSON.
      if (columns.empty()) return value.dump(2) + "\n";
      return Csv(rows_of ? rows_of(value) : json::array({value}), columns);
    case Format::kTable: break;
  }
  return Table(rows_of ? rows_of(value) : json::array({value}), columns);
}

}  // namespace jc::jcctl
