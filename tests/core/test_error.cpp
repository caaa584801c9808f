#include <doctest/doctest.h>

#include <string>
#include <string_view>
#include <utility>

import teeny.core;

using teeny::Errc;
using teeny::Error;
using teeny::Result;

namespace {
Result<int> parse_digit(char c) {
  if (c < '0' || c > '9') return teeny::fail(Errc::parse, "'", std::string(1, c), "' is not a digit");
  return c - '0';
}
Result<int> twice(char c) {
  auto d = parse_digit(c);
  if (!d) return std::move(d).error().context("while doubling");
  return *d * 2;
}
}  // namespace

TEST_CASE("Result holds a value or an error") {
  auto good = parse_digit('7');
  REQUIRE(good.has_value());
  CHECK(*good == 7);
  CHECK(good.value_or(-1) == 7);

  auto bad = parse_digit('x');
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code() == Errc::parse);
  CHECK(bad.error().message() == "'x' is not a digit");
  CHECK(bad.value_or(-1) == -1);
  CHECK(bad.error().to_string() == "parse error: 'x' is not a digit");
}

TEST_CASE("context is prepended as an error travels outwards") {
  auto r = twice('?');
  REQUIRE_FALSE(r);
  CHECK(r.error().message() == "while doubling: '?' is not a digit");
  auto r2 = twice('4');
  CHECK(*r2 == 8);
}

TEST_CASE("and_then / transform chain and short-circuit") {
  auto plus_one = [](int v) -> Result<int> { return v + 1; };
  CHECK(*parse_digit('3').and_then(plus_one) == 4);
  CHECK(*parse_digit('3').transform([](int v) { return std::to_string(v); }) == "3");
  auto failed = parse_digit('z').and_then(plus_one);
  CHECK(failed.error().code() == Errc::parse);
  auto ctx = parse_digit('z').context("reading key 'fc1.weight'");
  CHECK(ctx.error().message().starts_with("reading key 'fc1.weight': "));
}

TEST_CASE("Result<void> and message building") {
  Result<void> fine = teeny::ok();
  CHECK(fine.has_value());
  Result<void> broken = teeny::fail(Errc::not_found, "input '", "x", "' is missing");
  REQUIRE_FALSE(broken);
  CHECK(broken.error().message() == "input 'x' is missing");
  CHECK(teeny::cat("n=", 3, ", eps=", 1e-5, ", dtype=", teeny::DType::bf16, ", ok=", true) ==
        "n=3, eps=1e-05, dtype=bf16, ok=true");
  CHECK(teeny::cat(teeny::ConcreteShape{2, 3}, " vs ", teeny::Shape{teeny::Dim::sym("batch"), 3}) ==
        "[2, 3] vs [batch, 3]");
}
