// The stream-free error-message formatter (ops/csrc/message.h).
#include "../../ops/csrc/message.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using dbench::msg::cat;
using dbench::msg::Sizes;

TEST(Message, ConcatenatesStringsAndNumbersLikeAStream) {
  const std::string name = "x";
  EXPECT_EQ(cat("op: argument '", name, "' got ", 3, ", ", int64_t{-7}, ", ", 42u, ", ", true), "op: argument 'x' got 3, -7, 42, true");
  EXPECT_EQ(cat(1e-6, " ", -1.0, " ", 0.5, " ", 0.0, " ", 1234567.0), "1e-06 -1 0.5 0 1.23457e+06");
  EXPECT_EQ(cat(), "");
  EXPECT_EQ(cat(static_cast<const char*>(nullptr)), "(null)");
}

TEST(Message, PrintsShapesAsLists) {
  const std::vector<int64_t> shape{2, 3, 4};
  EXPECT_EQ(cat("shape ", Sizes{shape.data(), shape.size()}), "shape [2, 3, 4]");
  EXPECT_EQ(cat(Sizes{nullptr, 0}), "[]");
}

[[noreturn]] void fail(const std::string& message) { throw std::runtime_error(message); }

TEST(Message, CheckThrowsOnlyOnFailureAndEvaluatesThePartsLazily) {
  int evaluated = 0;
  auto part = [&] { ++evaluated; return std::string("detail"); };
  EXPECT_NO_THROW(DBENCH_CHECK(1 + 1 == 2, fail, "never ", part()));
  EXPECT_EQ(evaluated, 0);
  try {
    DBENCH_CHECK(1 + 1 == 3, fail, "op: bad ", part(), " ", 7);
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "op: bad detail 7");
  }
  EXPECT_EQ(evaluated, 1);
}

}  // namespace
