#pragma once
// Helpers for the teeny.graph tests: type literals, running an op's inference, and checking error
// messages. Include after `#include <doctest/doctest.h>` and `import teeny.graph;`.
#include <initializer_list>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace doctest {
template <>
struct StringMaker<teeny::TensorType> {
  static String convert(const teeny::TensorType& t) { return teeny::to_string(t).c_str(); }
};
template <>
struct StringMaker<teeny::Shape> {
  static String convert(const teeny::Shape& s) { return teeny::to_string(s).c_str(); }
};
}  // namespace doctest

namespace graph_test {

using namespace teeny;

inline const Dim batch = Dim::sym("batch");

inline TensorType f32(std::initializer_list<Dim> dims) { return {DType::f32, Shape(dims)}; }
inline TensorType half(std::initializer_list<Dim> dims) { return {DType::f16, Shape(dims)}; }
inline TensorType i64(std::initializer_list<Dim> dims) { return {DType::i64, Shape(dims)}; }
inline TensorType typed(DType dtype, std::initializer_list<Dim> dims) { return {dtype, Shape(dims)}; }

/// The op's output type for these inputs (arity checked), as GraphBuilder computes it.
inline Result<TensorType> run(const GraphOp& op, std::vector<TensorType> inputs) { return infer(op, inputs); }

/// The message of the error the op reports for these inputs ("" and a failed check when it succeeds).
inline std::string error_of(const GraphOp& op, std::vector<TensorType> inputs) {
  auto r = infer(op, inputs);
  CHECK_MESSAGE(!r, "expected an error from ", describe(op));
  return r ? std::string() : r.error().message();
}

inline bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

}  // namespace graph_test

/// Checks that `text` contains `part`, printing `text` when it does not.
#define CHECK_CONTAINS(text, part) CHECK_MESSAGE(graph_test::contains((text), (part)), "in: ", (text))
