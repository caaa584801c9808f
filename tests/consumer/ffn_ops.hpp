#pragma once
// Two ops teeny does not have, defined in this project only, as any user of teeny would:
//
//   SwiGLU       y = silu(x W1^T) * (x W3^T): LLaMA's gated feed-forward, parameters w1, w3
//   SquaredReLU  y = relu(x)^2: parameter-free, elementwise (Primer)
//
// Each comes in three parts: its graph op (attributes, shape and dtype inference, parameters
// named as PyTorch names them), its executable op (teeny's RuntimeOp, and BackwardOp in training
// builds) and its CPU kernel. ffn::ops<T> extends teeny's standard op set with them and
// ffn::lowering<T> is teeny's standard lowering plus one middleware that lowers them.
// Include after the std headers it includes and `import teeny;`.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace ffn {

template <teeny::FloatElement T>
struct swiglu_op;
template <teeny::FloatElement T>
struct squared_relu_op;

// ---- graph ops: what the graph builder records and checks --------------------------------------
// Each also serves as a layer of a typed model (teeny::fixed::Custom): infer_shape and param_slots
// state its rules for concrete shapes at compile time, and lower<T> makes its executable op (for
// the middleware below too).

/// PyTorch: a module holding `w1 = nn.Linear(in_features, hidden, bias=False)` and `w3` alike,
/// computing `F.silu(w1(x)) * w3(x)`; its state_dict keys `{node}.w1.weight`, `{node}.w3.weight`.
/// [..., in_features] -> [..., hidden].
struct SwiGLU {
  static constexpr std::string_view kind = "swiglu";
  static constexpr teeny::Arity arity{1, 1};
  std::int64_t in_features = 0;
  std::int64_t hidden = 0;

  teeny::Result<teeny::TensorType> infer(std::span<const teeny::TensorType> inputs) const {
    const teeny::TensorType& x = inputs[0];
    if (!teeny::is_floating(x.dtype)) {
      return teeny::fail(teeny::Errc::dtype_mismatch, "input ", x, " must be floating point");
    }
    if (in_features <= 0 || hidden <= 0) {
      return teeny::fail(teeny::Errc::invalid_argument, "in_features and hidden must be positive, got ", in_features,
                         " and ", hidden);
    }
    if (x.shape.rank() == 0 || x.shape.back() != teeny::Dim(in_features)) {
      return teeny::fail(teeny::Errc::shape_mismatch, "input ", x, " must be [..., ", in_features, "]");
    }
    teeny::TensorType y = x;
    y.shape[y.shape.rank() - 1] = hidden;
    return y;
  }
  std::vector<teeny::ParamSpec> params(std::span<const teeny::TensorType> inputs) const {
    const teeny::DType dtype = inputs[0].dtype;
    return {{"w1.weight", {hidden, in_features}, dtype}, {"w3.weight", {hidden, in_features}, dtype}};
  }
  std::string attributes() const {
    return "in_features=" + std::to_string(in_features) + ", hidden=" + std::to_string(hidden);
  }
  friend bool operator==(const SwiGLU&, const SwiGLU&) = default;

  constexpr teeny::fixed::Inferred infer_shape(std::span<const teeny::ConcreteShape> inputs) const {
    if (in_features <= 0 || hidden <= 0) return {{}, "in_features and hidden must be positive"};
    teeny::ConcreteShape y = inputs[0];
    if (y.rank() == 0 || y.last() != in_features) return {{}, "last dim is not in_features"};
    y[y.rank() - 1] = hidden;
    return {y, {}};
  }
  constexpr std::array<teeny::fixed::ParamSlot, 2> param_slots(std::span<const teeny::ConcreteShape>) const {
    return {{{"w1.weight", {hidden, in_features}}, {"w3.weight", {hidden, in_features}}}};
  }
  template <teeny::FloatElement T>
  swiglu_op<T> lower(const teeny::OpOutput& out) const {
    return {in_features, hidden, out};
  }
};

/// relu(x)^2, elementwise; no attributes, no parameters.
struct SquaredReLU {
  static constexpr std::string_view kind = "squared_relu";
  static constexpr teeny::Arity arity{1, 1};

  teeny::Result<teeny::TensorType> infer(std::span<const teeny::TensorType> inputs) const {
    if (!teeny::is_floating(inputs[0].dtype)) {
      return teeny::fail(teeny::Errc::dtype_mismatch, "input ", inputs[0], " must be floating point");
    }
    return inputs[0];
  }
  std::string attributes() const { return {}; }
  friend bool operator==(const SquaredReLU&, const SquaredReLU&) = default;

  constexpr teeny::fixed::Inferred infer_shape(std::span<const teeny::ConcreteShape> inputs) const {
    return {inputs[0], {}};
  }
  template <teeny::FloatElement T>
  squared_relu_op<T> lower(const teeny::OpOutput& out) const {
    return {out};
  }
};

static_assert(teeny::GraphOpWithParams<SwiGLU> && teeny::GraphOpType<SquaredReLU>);

// ---- executable ops: what a loaded model binds and runs -----------------------------------------

template <teeny::FloatElement T>
struct SwiGLUArgs {
  teeny::TensorView<const T> x;   // [rows, in_features]
  teeny::TensorView<const T> w1;  // [hidden, in_features]
  teeny::TensorView<const T> w3;
  teeny::TensorView<T> y;  // [rows, hidden]
  auto fields() const { return std::tie(x, w1, w3, y); }
};

#if TEENY_TRAINING
template <teeny::FloatElement T>
struct SwiGLUBackwardArgs {
  SwiGLUArgs<T> forward;
  teeny::TensorView<T> dy;
  teeny::TensorView<T> dx;  // empty when no gradient flows to the input
  teeny::TensorView<T> dw1;
  teeny::TensorView<T> dw3;
  auto fields() const { return std::tie(forward, dy, dx, dw1, dw3); }
};
#endif

template <teeny::FloatElement T>
struct swiglu_op {
  using Args = SwiGLUArgs<T>;
  std::int64_t in_features = 0;
  std::int64_t hidden = 0;
  teeny::OpOutput out;

  std::string_view name() const { return "swiglu"; }
  const teeny::Shape& output_shape() const { return out.shape; }
  teeny::DType output_dtype() const { return teeny::dtype_of<T>; }
  teeny::KernelInstance kernel() const {
    return {{"swiglu", "ffn_swiglu", ""}, teeny::backward_kernel_ref("swiglu_backward", "ffn_swiglu_backward")};
  }
  std::size_t n_activation_inputs() const { return 1; }
  std::span<const std::string_view> param_names() const {
    static constexpr std::string_view names[] = {"w1.weight", "w3.weight"};
    return names;
  }
  std::vector<teeny::ConcreteShape> param_shapes(std::span<const teeny::ConcreteShape>,
                                                 const teeny::ConcreteShape&) const {
    return {{hidden, in_features}, {hidden, in_features}};
  }
  teeny::Result<Args> pack_args(const teeny::OpBindings& b) const {
    auto x = teeny::input_view<const T>(b, 0);
    auto w1 = teeny::param_view<const T>(b, 0);
    auto w3 = teeny::param_view<const T>(b, 1);
    auto y = teeny::output_view<T>(b);
    if (auto e = teeny::first_error(x, w1, w3, y)) return *e;
    // Rows of features: [..., in_features] read as [rows, in_features].
    const std::int64_t rows = y->numel() / hidden;
    auto x2 = teeny::contiguous_as(*x, {rows, in_features}, "input");
    auto y2 = teeny::contiguous_as(*y, {rows, hidden}, "output");
    if (auto e = teeny::first_error(x2, y2)) return *e;
    return Args{*x2, *w1, *w3, *y2};
  }
  teeny::Dim3 block() const { return {128, 1, 1}; }
  teeny::Dim3 grid(const teeny::ConcreteShape& y) const { return {teeny::ceil_div(y.numel(), 128), 1, 1}; }

#if TEENY_TRAINING
  using BackwardArgs = SwiGLUBackwardArgs<T>;
  teeny::Result<BackwardArgs> pack_backward_args(const teeny::BackwardBindings& b) const {
    auto forward = pack_args(teeny::forward_bindings(b));
    if (!forward) return std::move(forward).error();
    BackwardArgs g{*forward, {}, {}, {}, {}};
    if (auto e = teeny::first_error(
            teeny::bind_grad_output(b, g.forward.y, g.dy), teeny::bind_grad_input(b, 0, g.forward.x, g.dx),
            teeny::bind_grad_param(b, 0, g.forward.w1, g.dw1), teeny::bind_grad_param(b, 1, g.forward.w3, g.dw3))) {
      return *e;
    }
    return g;
  }
  teeny::Dim3 backward_grid(std::span<const teeny::ConcreteShape>, const teeny::ConcreteShape& y) const {
    return grid(y);
  }
#endif
};

template <teeny::FloatElement T>
struct SquaredReLUArgs {
  teeny::TensorView<const T> x;
  teeny::TensorView<T> y;  // same shape as x
  auto fields() const { return std::tie(x, y); }
};

template <teeny::FloatElement T>
struct squared_relu_op {
  using Args = SquaredReLUArgs<T>;
  teeny::OpOutput out;

  std::string_view name() const { return "squared_relu"; }
  const teeny::Shape& output_shape() const { return out.shape; }
  teeny::DType output_dtype() const { return teeny::dtype_of<T>; }
  teeny::KernelInstance kernel() const {
    return {{"squared_relu", "ffn_squared_relu", ""},
            teeny::backward_kernel_ref("squared_relu_backward", "ffn_squared_relu_backward")};
  }
  std::size_t n_activation_inputs() const { return 1; }
  std::vector<teeny::ConcreteShape> param_shapes(std::span<const teeny::ConcreteShape>,
                                                 const teeny::ConcreteShape&) const {
    return {};
  }
  teeny::Result<Args> pack_args(const teeny::OpBindings& b) const {
    auto x = teeny::input_view<const T>(b, 0);
    auto y = teeny::output_view<T>(b);
    if (auto e = teeny::first_error(x, y)) return *e;
    return Args{*x, *y};
  }
  teeny::Dim3 block() const { return {256, 1, 1}; }
  teeny::Dim3 grid(const teeny::ConcreteShape& y) const { return {teeny::ceil_div(y.numel(), 256), 1, 1}; }

#if TEENY_TRAINING
  using BackwardArgs = teeny::InputGradArgs<Args, T>;  // dx += dy * 2 relu(x)
  teeny::Result<BackwardArgs> pack_backward_args(const teeny::BackwardBindings& b) const {
    return teeny::pack_input_grad<T>(*this, b);
  }
  teeny::Dim3 backward_grid(std::span<const teeny::ConcreteShape>, const teeny::ConcreteShape& y) const {
    return grid(y);
  }
#endif
};

static_assert(teeny::RuntimeOp<swiglu_op<float>> && teeny::RuntimeOp<squared_relu_op<double>>);
#if TEENY_TRAINING
static_assert(teeny::BackwardOp<swiglu_op<float>> && teeny::BackwardOp<squared_relu_op<double>>);
#endif

// ---- CPU kernels: found by teeny through argument-dependent lookup in this namespace ------------

template <teeny::CpuReal T>
teeny::Result<teeny::NoState> prepare_kernel(const swiglu_op<T>&, const SwiGLUArgs<T>&, teeny::CpuContext&) {
  return teeny::NoState{};
}

template <teeny::CpuReal T>
void run_kernel(const swiglu_op<T>& op, const SwiGLUArgs<T>& a, teeny::NoState&, teeny::CpuContext& cpu) {
  const std::int64_t rows = a.x.shape[0];
  const std::int64_t d = op.in_features;
  const std::int64_t h = op.hidden;
  teeny::parallel_chunks(cpu, rows, 2 * h * d, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const T* x = a.x.data + r * d;
      for (std::int64_t j = 0; j < h; ++j) {
        T gate = 0;
        T up = 0;
        for (std::int64_t k = 0; k < d; ++k) {
          gate += x[k] * a.w1.data[j * d + k];
          up += x[k] * a.w3.data[j * d + k];
        }
        a.y.data[r * h + j] = gate / (T(1) + std::exp(-gate)) * up;
      }
    }
  });
}

template <teeny::CpuReal T>
teeny::Result<teeny::NoState> prepare_kernel(const squared_relu_op<T>&, const SquaredReLUArgs<T>&, teeny::CpuContext&) {
  return teeny::NoState{};
}

template <teeny::CpuReal T>
void run_kernel(const squared_relu_op<T>&, const SquaredReLUArgs<T>& a, teeny::NoState&, teeny::CpuContext& cpu) {
  teeny::parallel_chunks(cpu, a.y.numel(), 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      const T r = std::max(a.x.data[i], T(0));
      a.y.data[i] = r * r;
    }
  });
}

#if TEENY_TRAINING
template <teeny::CpuReal T>
teeny::Result<teeny::NoState> prepare_backward_kernel(const swiglu_op<T>&, const SwiGLUBackwardArgs<T>&,
                                                      teeny::CpuContext&) {
  return teeny::NoState{};
}

// One thread, rows in order: dW1 and dW3 sum over every row, and a fixed order keeps the sums
// deterministic.
template <teeny::CpuReal T>
void run_backward_kernel(const swiglu_op<T>& op, const SwiGLUBackwardArgs<T>& g, teeny::NoState&, teeny::CpuContext&) {
  const SwiGLUArgs<T>& a = g.forward;
  const std::int64_t rows = a.x.shape[0];
  const std::int64_t d = op.in_features;
  const std::int64_t h = op.hidden;
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* x = a.x.data + r * d;
    for (std::int64_t j = 0; j < h; ++j) {
      T gate = 0;
      T up = 0;
      for (std::int64_t k = 0; k < d; ++k) {
        gate += x[k] * a.w1.data[j * d + k];
        up += x[k] * a.w3.data[j * d + k];
      }
      const T s = T(1) / (T(1) + std::exp(-gate));
      const T dy = g.dy.data[r * h + j];
      const T d_gate = dy * up * s * (T(1) + gate * (T(1) - s));  // silu'(a) = s (1 + a (1 - s))
      const T d_up = dy * gate * s;
      for (std::int64_t k = 0; k < d; ++k) {
        if (g.dx.data != nullptr) g.dx.data[r * d + k] += d_gate * a.w1.data[j * d + k] + d_up * a.w3.data[j * d + k];
        if (g.dw1.data != nullptr) g.dw1.data[j * d + k] += d_gate * x[k];
        if (g.dw3.data != nullptr) g.dw3.data[j * d + k] += d_up * x[k];
      }
    }
  }
}

template <teeny::CpuReal T>
teeny::Result<teeny::NoState> prepare_backward_kernel(const squared_relu_op<T>&,
                                                      const teeny::InputGradArgs<SquaredReLUArgs<T>, T>&,
                                                      teeny::CpuContext&) {
  return teeny::NoState{};
}

template <teeny::CpuReal T>
void run_backward_kernel(const squared_relu_op<T>&, const teeny::InputGradArgs<SquaredReLUArgs<T>, T>& g,
                         teeny::NoState&, teeny::CpuContext& cpu) {
  if (g.dx.data == nullptr) return;
  teeny::parallel_chunks(cpu, g.dx.numel(), 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i)
      g.dx.data[i] += g.dy.data[i] * T(2) * std::max(g.forward.x.data[i], T(0));
  });
}
#endif

// ---- the op set and the lowering ------------------------------------------------------------------

/// teeny's standard ops and these two, for element type T.
template <teeny::FloatElement T>
using ops = teeny::extend_ops<teeny::standard_ops<T>, swiglu_op<T>, squared_relu_op<T>>;

/// A lowering middleware: lowers SwiGLU and SquaredReLU nodes to their executable ops and hands
/// every other node to its Base (teeny's standard node lowering, with its fusions).
template <teeny::FloatElement T>
struct middleware {
  template <class Base>
  struct over {
    using op_set = typename Base::op_set;
    Base base;
    const Base* base_lowering() const { return &base; }

    teeny::Result<bool> lower_node(teeny::LoweringContext<op_set>& ctx, teeny::NodeId g) const {
      const auto& node = ctx.graph().dag()[g];
      const auto* swiglu = teeny::op_if<SwiGLU>(node.op.op);
      const auto* squared_relu = teeny::op_if<SquaredReLU>(node.op.op);
      if (swiglu == nullptr && squared_relu == nullptr) return base.lower_node(ctx, g);
      if (node.op.type.dtype != teeny::dtype_of<T>) {
        return teeny::fail(teeny::Errc::unsupported, "its output is ", node.op.type.dtype,
                           ", but this lowering computes in ", teeny::dtype_of<T>);
      }
      const teeny::OpOutput out{node.op.type.shape, node.op.type.dtype};
      op_set op =
          swiglu != nullptr ? op_set(swiglu->template lower<T>(out)) : op_set(squared_relu->template lower<T>(out));
      auto id = ctx.emit(g, std::move(op), ctx.inputs(g), node.name);
      if (!id) return std::move(id).error();
      return true;
    }
  };
};

/// teeny's standard lowering, plus the middleware for these ops.
template <teeny::FloatElement T>
using lowering = teeny::standard_lowering<T, ops<T>, middleware<T>::template over>;

static_assert(teeny::Lowering<lowering<float>>);

}  // namespace ffn
