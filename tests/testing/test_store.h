#pragma once

// The store a test runs against. JC_TEST_STORE picks the backend so the same test
// binaries run on both (the README's test command runs them twice):
//   unset or "sqlite"  -> a fresh in-memory SQLite database
//   "postgres"         -> a fresh schema in the database at JC_TEST_PG_URI
#include <memory>
#include <string>

#include "common/store/store.h"

namespace jc::testing {

std::unique_ptr<store::Store> MakeTestStore();
// "sqlite" or "postgres", as the tests are running.
std::string TestStoreBackend();

}  // namespace jc::testing
