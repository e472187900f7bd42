#pragma once

// Early-return helpers for absl::Status / absl::StatusOr, in the style of
// google-cloud-cpp and Envoy. They keep error paths one line long.

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define JC_CONCAT_INNER_(a, b) a##b
#define JC_CONCAT_(a, b) JC_CONCAT_INNER_(a, b)

// Returns the status from the enclosing function when `expr` is not OK.
#define JC_RETURN_IF_ERROR(expr)                  \
  do {                                            \
    ::absl::Status jc_status_ = (expr);           \
    if (!jc_status_.ok()) return jc_status_;      \
  } while (false)

// `JC_ASSIGN_OR_RETURN(auto x, MaybeX());` binds the value or returns the error.
#define JC_ASSIGN_OR_RETURN(lhs, expr) \
  JC_ASSIGN_OR_RETURN_IMPL_(JC_CONCAT_(jc_statusor_, __LINE__), lhs, expr)
#define JC_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()
