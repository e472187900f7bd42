#include "tests/testing/test_store.h"

#include <atomic>
#include <cstdlib>
#include <random>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"

namespace jc::testing {

std::string TestStoreBackend() {
  const char* backend = std::getenv("JC_TEST_STORE");
  return backend == nullptr || *backend == '\0' ? "sqlite" : backend;
}

std::unique_ptr<store::Store> MakeTestStore() {
  std::string backend = TestStoreBackend();
  if (backend == "sqlite") {
    auto store = store::OpenStore("sqlite::memory:");
    REQUIRE(store.ok());
    return std::move(store).value();
  }
  REQUIRE(backend == "postgres");
  const char* uri = std::getenv("JC_TEST_PG_URI");
  INFO("JC_TEST_STORE=postgres needs JC_TEST_PG_URI (the test script sets both)");
  REQUIRE(uri != nullptr);
  static std::atomic<int> counter{0};
  std::random_device rd;
  std::string schema = absl::StrCat("t_", rd(), "_", counter++);
  auto store = store::OpenStore(uri, schema);
  INFO(store.status().ToString());
  REQUIRE(store.ok());
  return std::move(store).value();
}

}  // namespace jc::testing
