#pragma once
// Shared by the teeny.train tests: the PyTorch fixtures of tools/make_train_fixtures.py (expected
// values in f64), owning parameters, and tolerant comparisons (float against PyTorch's f64 values
// to 1e-5, double to 1e-12). Include after `import teeny.core; import teeny.io; import teeny.train;`.
#include <doctest/doctest.h>

#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace train_test {

inline bool contains(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

inline teeny::SafetensorsFile open(std::string_view file) {
  auto f = teeny::SafetensorsFile::open(std::string(TEENY_FIXTURES_DIR) + "/train/" + std::string(file));
  REQUIRE_MESSAGE(f, (f ? "" : f.error().to_string()));
  return std::move(*f);
}

/// The fixture tensor `key` converted to dtype_of<T>.
template <teeny::Element T>
teeny::Tensor read(const teeny::SafetensorsFile& f, const std::string& key) {
  auto t = f.read(key, teeny::dtype_of<T>);
  REQUIRE_MESSAGE(t, (t ? "" : t.error().to_string()));
  return std::move(*t);
}

template <class T>
inline constexpr double rtol = std::same_as<T, double> ? 1e-12 : 1e-5;
template <class T>
inline constexpr double atol = std::same_as<T, double> ? 1e-14 : 1e-7;

inline bool near(double got, double want, double rel, double abs_tol) {
  return (std::isnan(got) && std::isnan(want)) || std::abs(got - want) <= abs_tol + rel * std::abs(want);
}

/// got (T elements) against the f64 fixture tensor `key`, elementwise.
template <class T>
void check_close(std::span<const T> got, const teeny::SafetensorsFile& f, const std::string& key, double rel = rtol<T>,
                 double abs_tol = atol<T>) {
  const teeny::Tensor want = read<double>(f, key);
  REQUIRE_MESSAGE(static_cast<std::int64_t>(got.size()) == want.numel(), key);
  const double* w = reinterpret_cast<const double*>(want.data());
  std::int64_t bad = 0;
  std::int64_t first = -1;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!near(static_cast<double>(got[i]), w[i], rel, abs_tol)) {
      if (first < 0) first = static_cast<std::int64_t>(i);
      ++bad;
    }
  }
  INFO(key << ": first mismatch at " << first << ": got "
           << (first >= 0 ? static_cast<double>(got[static_cast<std::size_t>(first)]) : 0.0) << ", PyTorch "
           << (first >= 0 ? w[first] : 0.0) << " (" << bad << " of " << got.size() << " differ)");
  CHECK(bad == 0);
}

template <class T>
void check_scalar(double got, const teeny::SafetensorsFile& f, const std::string& key, double rel = rtol<T>,
                  double abs_tol = atol<T>) {
  const teeny::Tensor want = read<double>(f, key);
  const double w = *reinterpret_cast<const double*>(want.data());
  INFO(key << ": got " << got << ", PyTorch " << w);
  CHECK(near(got, w, rel, abs_tol));
}

template <class T>
std::span<const T> elements(const teeny::Tensor& t) {
  return {reinterpret_cast<const T*>(t.data()), static_cast<std::size_t>(t.numel())};
}
template <class T>
std::span<T> elements(teeny::Tensor& t) {
  return {reinterpret_cast<T*>(t.data()), static_cast<std::size_t>(t.numel())};
}

template <class T>
teeny::Tensor zeros(const teeny::ConcreteShape& shape) {
  auto t = teeny::Tensor::zeros(teeny::dtype_of<T>, shape);
  REQUIRE(t);
  return std::move(*t);
}

/// Parameters whose value and grad a test owns.
template <class T>
struct OwnedParams {
  std::vector<teeny::Tensor> values;
  std::vector<teeny::Tensor> grads;
  std::vector<teeny::Parameter<T>> params;

  explicit OwnedParams(const std::vector<teeny::ConcreteShape>& shapes) {
    for (const auto& s : shapes) {
      values.push_back(zeros<T>(s));
      grads.push_back(zeros<T>(s));
    }
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      params.push_back({"p" + std::to_string(i), *values[i].template view<T>(), *grads[i].template view<T>()});
    }
  }
  OwnedParams(const OwnedParams&) = delete;
  std::span<const teeny::Parameter<T>> span() const { return params; }
};

}  // namespace train_test
