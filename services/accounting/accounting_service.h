#pragma once

#include <memory>

#include <grpcpp/grpcpp.h>

#include "services/accounting/reconciliation.h"
#include "services/accounting/settlement.h"
#include "services/accounting/usage_book.h"
#include "services/accounting/utilisation.h"

namespace jc::accounting {

// AccountingService over gRPC: a caller sees the records of the projects it views (an
// admin: all), decided where the request enters, never by a request field.
// Settlements are closed by admins; a statement shows a caller the lines of the projects
// it views and the centers it operates (admins: all).
// Reconciliation is for admins and the center's operators; so is utilisation (an operator
// sees the centers it operates).
std::unique_ptr<grpc::Service> MakeAccountingService(UsageBook* book, Settlements* settlements,
                                                     Reconciler* reconciler, Utilisation* utilisation);

}  // namespace jc::accounting
