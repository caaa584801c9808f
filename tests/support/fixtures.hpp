#pragma once
// Reading the PyTorch fixtures (tests/fixtures, made by tools/make_fixtures.py) and comparing
// teeny's outputs with them. Include after `import teeny;` and the std headers below.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fixtures {

/// tests/fixtures/<relative>; the environment's TEENY_FIXTURES_DIR, where set, replaces the
/// directory compiled in (a test binary carried to another machine: tools/gpu-check).
inline std::string path(std::string_view relative) {
  const char* moved = std::getenv("TEENY_FIXTURES_DIR");  // NOLINT(concurrency-mt-unsafe): read once per test
  return std::string(moved != nullptr ? moved : TEENY_FIXTURES_DIR) + "/" + std::string(relative);
}

/// A whole-model fixture (tests/fixtures/models/<name>.safetensors): the PyTorch weights, with the
/// input `in.x` and PyTorch's output `out.logits` stored beside them.
struct Model {
  teeny::SafetensorsFile file;
  teeny::Tensor x;
  teeny::Tensor logits;
};
inline Model model(const std::string& name) {
  auto file = teeny::SafetensorsFile::open(path("models/" + name + ".safetensors"));
  REQUIRE_MESSAGE(file, (file ? "" : file.error().to_string()));
  auto x = file->read("in.x");
  auto logits = file->read("out.logits");
  REQUIRE(x);
  REQUIRE(logits);
  return {std::move(*file), std::move(*x), std::move(*logits)};
}

/// Checks `actual` (a model output binding of element type T) against the fixture tensor `expected`
/// elementwise: |a - e| <= atol + rtol * |e| (NaN matches NaN), reporting the first mismatch.
template <class T>
void check_close_as(const teeny::TensorBinding& actual, const teeny::Tensor& expected, double rtol, double atol) {
  REQUIRE(actual.shape == expected.shape());
  auto got = actual.as<const T>();
  auto want = expected.view<T>();
  REQUIRE(got);
  REQUIRE(want);
  const std::int64_t n = expected.numel();
  std::int64_t bad = 0;
  std::int64_t first_bad = -1;
  for (std::int64_t i = 0; i < n; ++i) {
    const double a = got->data[i];
    const double e = want->data[i];
    const bool both_nan = std::isnan(a) && std::isnan(e);
    if (!both_nan && !(std::abs(a - e) <= atol + rtol * std::abs(e))) {
      if (first_bad < 0) first_bad = i;
      ++bad;
    }
  }
  INFO("first mismatch at element " << first_bad << ": got " << (first_bad >= 0 ? got->data[first_bad] : T(0))
                                    << ", PyTorch " << (first_bad >= 0 ? want->data[first_bad] : T(0)) << " (" << bad
                                    << " of " << n << " differ)");
  CHECK(bad == 0);
}

/// f32 outputs against PyTorch's f32 results.
inline void check_close(const teeny::TensorBinding& actual, const teeny::Tensor& expected, double rtol = 1e-5,
                        double atol = 1e-6) {
  check_close_as<float>(actual, expected, rtol, atol);
}

/// f64 outputs against PyTorch's f64 results: the same formulas, so only rounding differs (a few
/// ulps per operation, a few more where PyTorch sums in another order).
inline void check_close_f64(const teeny::TensorBinding& actual, const teeny::Tensor& expected, double rtol = 1e-12,
                            double atol = 1e-14) {
  check_close_as<double>(actual, expected, rtol, atol);
}

/// Checks `actual` against a reference computed independently (in double): |a - e| <= atol +
/// rtol * |e| elementwise, reporting the first mismatch.
inline void check_near(const teeny::TensorBinding& actual, const std::vector<double>& expected, double rtol = 1e-5,
                       double atol = 1e-6) {
  auto got = actual.as<const float>();
  REQUIRE(got);
  REQUIRE(got->numel() == static_cast<std::int64_t>(expected.size()));
  std::int64_t bad = 0;
  std::int64_t first_bad = -1;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (!(std::abs(got->data[i] - expected[i]) <= atol + rtol * std::abs(expected[i]))) {
      if (first_bad < 0) first_bad = static_cast<std::int64_t>(i);
      ++bad;
    }
  }
  INFO("first mismatch at element " << first_bad << ": got " << (first_bad >= 0 ? got->data[first_bad] : 0.0f)
                                    << ", expected " << (first_bad >= 0 ? expected[first_bad] : 0.0) << " (" << bad
                                    << " of " << expected.size() << " differ)");
  CHECK(bad == 0);
}

/// `t` repeated `times` along dim 0 (a fixture's batch made larger).
inline teeny::Tensor repeated(const teeny::Tensor& t, std::int64_t times) {
  teeny::ConcreteShape shape = t.shape();
  shape[0] *= times;
  auto out = teeny::Tensor::zeros(t.dtype(), shape);
  REQUIRE(out);
  for (std::int64_t i = 0; i < times; ++i) {
    std::memcpy(out->data() + static_cast<std::size_t>(i) * t.bytes(), t.data(), t.bytes());
  }
  return std::move(*out);
}

}  // namespace fixtures
