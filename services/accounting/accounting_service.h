#pragma once

#include <memory>

#include <grpcpp/grpcpp.h>

#include "services/accounting/usage_book.h"

namespace jc::accounting {

// AccountingService over gRPC: a caller sees the records of the projects it views (an
// admin: all), decided where the request enters, never by a request field.
std::unique_ptr<grpc::Service> MakeAccountingService(UsageBook* book);

}  // namespace jc::accounting
