// teeny.cpu:elementwise — CPU kernels of unary_op and binary_op (broadcasting), and the in-place
// activation the GEMM epilogue falls back on. The per-element math is kernels/math/elementwise.hpp.
module;
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "cpu/kernels/gemm.hpp"
#include "math/elementwise.hpp"
export module teeny.cpu:elementwise;
import teeny.core;
import teeny.model;
import teeny.ops;
import :context;

export namespace teeny {

Result<NoState> prepare_kernel(const unary_op<float>& op, const UnaryArgs<float>& args, CpuContext& cpu);
void run_kernel(const unary_op<float>& op, const UnaryArgs<float>& args, NoState& state, CpuContext& cpu);
Result<NoState> prepare_kernel(const binary_op<float>& op, const BinaryArgs<float>& args, CpuContext& cpu);
void run_kernel(const binary_op<float>& op, const BinaryArgs<float>& args, NoState& state, CpuContext& cpu);

/// y = fn(y) over a contiguous view, in parallel chunks.
void apply_unary_inplace(const TensorView<float>& y, UnaryFn fn, UnaryParams params, CpuContext& cpu);

/// The GEMM epilogue activation for `e` (none when inactive); false when the GEMM has no such
/// activation, and the caller applies it afterwards (apply_unary_inplace).
bool gemm_activation(const Epilogue& e, cpu::Activation& out);

}  // namespace teeny

namespace teeny {
namespace {
constexpr std::int64_t chunk = 1 << 14;  // elements per task: big enough to amortise a wake-up

// Calls body.template operator()<F>() with the function as a compile-time constant, so the
// per-element switch folds away and the loop vectorises.
template <class Body>
void with_unary(UnaryFn fn, Body&& body) {
  switch (fn) {
    case UnaryFn::relu: return body.template operator()<UnaryFn::relu>();
    case UnaryFn::leaky_relu: return body.template operator()<UnaryFn::leaky_relu>();
    case UnaryFn::gelu_erf: return body.template operator()<UnaryFn::gelu_erf>();
    case UnaryFn::gelu_tanh: return body.template operator()<UnaryFn::gelu_tanh>();
    case UnaryFn::silu: return body.template operator()<UnaryFn::silu>();
    case UnaryFn::sigmoid: return body.template operator()<UnaryFn::sigmoid>();
    case UnaryFn::tanh: return body.template operator()<UnaryFn::tanh>();
    case UnaryFn::softplus: return body.template operator()<UnaryFn::softplus>();
    case UnaryFn::elu: return body.template operator()<UnaryFn::elu>();
    case UnaryFn::hardswish: return body.template operator()<UnaryFn::hardswish>();
    case UnaryFn::exp: return body.template operator()<UnaryFn::exp>();
    case UnaryFn::log: return body.template operator()<UnaryFn::log>();
    case UnaryFn::sqrt: return body.template operator()<UnaryFn::sqrt>();
    case UnaryFn::abs: return body.template operator()<UnaryFn::abs>();
    case UnaryFn::neg: return body.template operator()<UnaryFn::neg>();
    case UnaryFn::reciprocal: return body.template operator()<UnaryFn::reciprocal>();
  }
}

template <class Body>
void with_binary(BinaryFn fn, Body&& body) {
  switch (fn) {
    case BinaryFn::add: return body.template operator()<BinaryFn::add>();
    case BinaryFn::sub: return body.template operator()<BinaryFn::sub>();
    case BinaryFn::mul: return body.template operator()<BinaryFn::mul>();
    case BinaryFn::div: return body.template operator()<BinaryFn::div>();
    case BinaryFn::pow: return body.template operator()<BinaryFn::pow>();
    case BinaryFn::maximum: return body.template operator()<BinaryFn::maximum>();
    case BinaryFn::minimum: return body.template operator()<BinaryFn::minimum>();
  }
}

// y[j] = F(a[j * sa], b[j * sb]) for j < n; the unit-stride and broadcast (stride 0) cases get
// loops of their own so that they vectorise.
template <BinaryFn F>
void binary_row(const float* a, std::int64_t sa, const float* b, std::int64_t sb, float* y, std::int64_t n) {
  if (sa == 1 && sb == 1) {
    for (std::int64_t j = 0; j < n; ++j) y[j] = math::apply_binary(F, a[j], b[j]);
  } else if (sa == 1 && sb == 0) {
    const float bv = *b;
    for (std::int64_t j = 0; j < n; ++j) y[j] = math::apply_binary(F, a[j], bv);
  } else if (sa == 0 && sb == 1) {
    const float av = *a;
    for (std::int64_t j = 0; j < n; ++j) y[j] = math::apply_binary(F, av, b[j]);
  } else {
    for (std::int64_t j = 0; j < n; ++j) y[j] = math::apply_binary(F, a[j * sa], b[j * sb]);
  }
}

void unary_map(const float* x, float* y, std::int64_t n, UnaryFn fn, UnaryParams params, CpuContext& cpu) {
  const auto tasks = static_cast<std::size_t>((n + chunk - 1) / chunk);
  with_unary(fn, [&]<UnaryFn F>() {
    cpu.pool().parallel_for(tasks, [&](std::size_t task) {
      const std::int64_t begin = static_cast<std::int64_t>(task) * chunk;
      const std::int64_t end = std::min(n, begin + chunk);
      for (std::int64_t i = begin; i < end; ++i) y[i] = math::apply_unary(F, x[i], params);
    });
  });
}
}  // namespace

void apply_unary_inplace(const TensorView<float>& y, UnaryFn fn, UnaryParams params, CpuContext& cpu) {
  unary_map(y.data, y.data, y.numel(), fn, params, cpu);
}

bool gemm_activation(const Epilogue& e, cpu::Activation& out) {
  if (!e.active) {
    out = cpu::Activation::none;
    return true;
  }
  switch (e.fn) {
    case UnaryFn::relu: out = cpu::Activation::relu; return true;
    case UnaryFn::leaky_relu: out = cpu::Activation::leaky_relu; return true;
    case UnaryFn::gelu_erf: out = cpu::Activation::gelu_erf; return true;
    case UnaryFn::gelu_tanh: out = cpu::Activation::gelu_tanh; return true;
    case UnaryFn::silu: out = cpu::Activation::silu; return true;
    case UnaryFn::sigmoid: out = cpu::Activation::sigmoid; return true;
    case UnaryFn::tanh: out = cpu::Activation::tanh; return true;
    default: return false;
  }
}

Result<NoState> prepare_kernel(const unary_op<float>&, const UnaryArgs<float>&, CpuContext&) { return NoState{}; }

void run_kernel(const unary_op<float>&, const UnaryArgs<float>& args, NoState&, CpuContext& cpu) {
  unary_map(args.x.data, args.y.data, args.y.numel(), args.fn, args.params, cpu);
}

Result<NoState> prepare_kernel(const binary_op<float>&, const BinaryArgs<float>&, CpuContext&) { return NoState{}; }

void run_kernel(const binary_op<float>&, const BinaryArgs<float>& args, NoState&, CpuContext& cpu) {
  // y is contiguous; a and b are read through broadcast strides. Rows of the last dim are the unit
  // of work: each task finds its rows' starting offsets in a and b, then runs along the row.
  const ConcreteShape& shape = args.y.shape;
  const std::size_t rank = shape.rank();
  const std::int64_t numel = shape.numel();
  // Both operands as contiguous as y (a residual add): one flat loop.
  const bool flat = args.a.is_contiguous() && args.b.is_contiguous() && args.a.shape == shape && args.b.shape == shape;
  const std::int64_t inner = flat ? numel : rank == 0 ? 1 : shape[rank - 1];
  const std::int64_t rows = inner == 0 ? 0 : numel / inner;
  const std::int64_t sa = flat ? 1 : rank == 0 ? 0 : args.a.strides[rank - 1];
  const std::int64_t sb = flat ? 1 : rank == 0 ? 0 : args.b.strides[rank - 1];
  const std::int64_t per_task = std::max<std::int64_t>(1, chunk / std::max<std::int64_t>(inner, 1));
  const std::int64_t row_tasks = (rows + per_task - 1) / per_task;
  // A flat operation is cut into chunks instead of rows.
  const std::int64_t tasks = flat ? (numel + chunk - 1) / chunk : row_tasks;
  // A fused activation runs on each task's part of y while it is still in cache.
  auto activate = [&](std::int64_t begin, std::int64_t end) {
    if (!args.epilogue.active) return;
    with_unary(args.epilogue.fn, [&]<UnaryFn A>() {
      float* y = args.y.data;
      for (std::int64_t i = begin; i < end; ++i) y[i] = math::apply_unary(A, y[i], args.epilogue.params);
    });
  };
  with_binary(args.fn, [&]<BinaryFn F>() {
    cpu.pool().parallel_for(static_cast<std::size_t>(tasks), [&](std::size_t task) {
      const auto t = static_cast<std::int64_t>(task);
      if (flat) {
        const std::int64_t begin = t * chunk;
        const std::int64_t end = std::min(numel, begin + chunk);
        binary_row<F>(args.a.data + begin, 1, args.b.data + begin, 1, args.y.data + begin, end - begin);
        activate(begin, end);
        return;
      }
      const std::int64_t first = t * per_task;
      const std::int64_t last = std::min(rows, (t + 1) * per_task);
      for (std::int64_t row = first; row < last; ++row) {
        std::int64_t rest = row;
        std::int64_t oa = 0;
        std::int64_t ob = 0;
        for (std::size_t d = rank - 1; d-- > 0;) {
          const std::int64_t coordinate = rest % shape[d];
          rest /= shape[d];
          oa += coordinate * args.a.strides[d];
          ob += coordinate * args.b.strides[d];
        }
        binary_row<F>(args.a.data + oa, sa, args.b.data + ob, sb, args.y.data + row * inner, inner);
      }
      activate(first * inner, last * inner);
    });
  });
}

}  // namespace teeny
