// teeny.onnx:ops_inputs — what the converters of ops with weights or windows require of their
// inputs: weights that are constants (initializers), dims that are concrete.
export module teeny.onnx:ops_inputs;
import teeny.std;
import teeny.core;
import teeny.graph;
import :context;
import :tensors;

namespace teeny::onnx::convert {

// The weight at input i, which must be a constant.
Result<Tensor> weight(NodeContext& n, std::size_t i, std::string_view what) {
  const Tensor* c = n.constant(i);
  if (c == nullptr) {
    return NodeContext::unsupported(what, " (input ", i, ") is computed at run time; teeny takes it only as a ",
                                    "constant (an initializer)");
  }
  return copy_of(*c);
}

// Multiplies a float tensor's elements by `factor`.
Result<void> scale(Tensor& t, double factor) {
  if (factor == 1) return ok();
  const auto n = static_cast<std::size_t>(t.numel());
  if (t.dtype() == DType::f32) {
    auto* p = reinterpret_cast<float*>(t.data());
    for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<float>(p[i] * factor);
  } else if (t.dtype() == DType::f64) {
    auto* p = reinterpret_cast<double*>(t.data());
    for (std::size_t i = 0; i < n; ++i) p[i] *= factor;
  } else {
    return NodeContext::unsupported("a scale factor on a ", t.dtype(), " weight");
  }
  return ok();
}

// The dims of a type, each of which must be concrete.
Result<std::vector<std::int64_t>> concrete(const TensorType& t, std::string_view what) {
  std::vector<std::int64_t> dims;
  for (const Dim& d : t.shape.dims()) {
    if (!d.is_concrete())
      return NodeContext::unsupported(what, " needs concrete dims, and ", t.shape, " has a symbolic one");
    dims.push_back(d.value);
  }
  return dims;
}

}  // namespace teeny::onnx::convert
