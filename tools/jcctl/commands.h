#pragma once

// jcctl's commands (the table cli.h parses against) and what they share.

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/jcctl/cli.h"
#include "tools/jcctl/client.h"
#include "tools/jcctl/output.h"

namespace jc::jcctl {

// What a running command reaches: the server (connected on first use), the output format
// and the two streams.
class Context {
 public:
  Context(ServerConfig server, Format format, std::ostream& out, std::ostream& err)
      : server_(std::move(server)), format_(format), out_(out), err_(err) {}

  absl::StatusOr<Client*> client();
  Format format() const { return format_; }
  std::ostream& out() { return out_; }
  std::ostream& err() { return err_; }
  // Prints "jcctl: <message>" on stderr and returns the status's exit code.
  int Fail(const absl::Status& status);

 private:
  ServerConfig server_;
  Format format_;
  std::ostream& out_;
  std::ostream& err_;
  std::unique_ptr<Client> client_;
};

// Reads a job (or center) file: JSON, or YAML turned into the same JSON. InvalidArgument
// naming the file for one that is missing or malformed.
absl::StatusOr<nlohmann::json> ReadDocument(const std::string& path);

std::vector<CommandSpec> Commands();

}  // namespace jc::jcctl
