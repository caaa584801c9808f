// teeny.cpu:elementwise — CPU kernels of unary_op, binary_op, compare_op and where_op (broadcasting),
// and the in-place activation the GEMM epilogue falls back on. The per-element math is
// kernels/math/unary.hpp (unary functions) and elementwise.hpp (binary ones, comparisons).
module;
#include "cpu/kernels/gemm.hpp"
#include "math/elementwise.hpp"
#include "math/gradient.hpp"
#include "math/random.hpp"
export module teeny.cpu:elementwise;
import teeny.std;
import teeny.core;
import teeny.model;
import teeny.ops;
import :context;

export namespace teeny {

// Each kernel is a template over the element type, compiled here for float and double (the
// explicit instantiations at the end): importers call those instances, they compile none.
template <CpuReal T>
Result<NoState> prepare_kernel(const unary_op<T>& op, const UnaryArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_kernel(const unary_op<T>& op, const UnaryArgs<T>& args, NoState& state, CpuContext& cpu);
template <CpuReal T>
Result<NoState> prepare_kernel(const binary_op<T>& op, const BinaryArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_kernel(const binary_op<T>& op, const BinaryArgs<T>& args, NoState& state, CpuContext& cpu);

template <CpuReal T>
Result<NoState> prepare_kernel(const dropout_op<T>& op, const DropoutArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_kernel(const dropout_op<T>& op, const DropoutArgs<T>& args, NoState& state, CpuContext& cpu);
template <CpuReal T>
Result<NoState> prepare_kernel(const compare_op<T>& op, const CompareArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_kernel(const compare_op<T>& op, const CompareArgs<T>& args, NoState& state, CpuContext& cpu);
template <CpuReal T>
Result<NoState> prepare_kernel(const where_op<T>& op, const WhereArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_kernel(const where_op<T>& op, const WhereArgs<T>& args, NoState& state, CpuContext& cpu);

#if TEENY_TRAINING
template <CpuReal T>
Result<NoState> prepare_backward_kernel(const unary_op<T>& op, const InputGradArgs<UnaryArgs<T>, T>& args,
                                        CpuContext& cpu);
template <CpuReal T>
void run_backward_kernel(const unary_op<T>& op, const InputGradArgs<UnaryArgs<T>, T>& args, NoState& state,
                         CpuContext& cpu);
template <CpuReal T>
Result<NoState> prepare_backward_kernel(const binary_op<T>& op, const BinaryBackwardArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_backward_kernel(const binary_op<T>& op, const BinaryBackwardArgs<T>& args, NoState& state, CpuContext& cpu);
template <CpuReal T>
Result<NoState> prepare_backward_kernel(const dropout_op<T>& op, const InputGradArgs<DropoutArgs<T>, T>& args,
                                        CpuContext& cpu);
template <CpuReal T>
void run_backward_kernel(const dropout_op<T>& op, const InputGradArgs<DropoutArgs<T>, T>& args, NoState& state,
                         CpuContext& cpu);

/// dy *= act'(y) elementwise (contiguous views of one shape): the gradient before a fused
/// activation `e`, from its output. Nothing when `e` is inactive. T is deduced from dy alone, so
/// that y may be passed as a TensorView<T>.
template <CpuReal T>
void epilogue_backward(const Epilogue& e, const TensorView<T>& dy, const TensorView<const std::type_identity_t<T>>& y,
                       CpuContext& cpu);
#endif

/// y = fn(y) over a contiguous view, in parallel chunks.
template <CpuReal T>
void apply_unary_inplace(const TensorView<T>& y, UnaryFn fn, UnaryParams params, CpuContext& cpu);

/// The GEMM epilogue activation for `e` (none when inactive); false when the GEMM has no such
/// activation, and the caller applies it afterwards (apply_unary_inplace).
bool gemm_activation(const Epilogue& e, cpu::Activation& out);

}  // namespace teeny

namespace teeny {
namespace {
constexpr std::int64_t chunk = 1 << 14;  // elements per task: big enough to amortise a wake-up

// Calls body.template operator()<F>() with the function as a compile-time constant, so the
// per-element switch folds away and the loop vectorises. One instance per UnaryFn below `count`:
// a new function needs nothing here.
template <class Body, std::size_t... F>
void with_unary(UnaryFn fn, Body& body, std::index_sequence<F...>) {
  (void)((static_cast<std::size_t>(fn) == F && (body.template operator()<static_cast<UnaryFn>(F)>(), true)) || ...);
}
template <class Body>
void with_unary(UnaryFn fn, Body&& body) {
  with_unary(fn, body, std::make_index_sequence<math::unary_fn_count>{});
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
    case BinaryFn::fmod: return body.template operator()<BinaryFn::fmod>();
  }
}

// y[j] = F(a[j * sa], b[j * sb]) for j < n; the unit-stride and broadcast (stride 0) cases get
// loops of their own so that they vectorise.
template <BinaryFn F, class T>
void binary_row(const T* a, std::int64_t sa, const T* b, std::int64_t sb, T* y, std::int64_t n) {
  if (sa == 1 && sb == 1) {
    for (std::int64_t j = 0; j < n; ++j) y[j] = math::apply_binary(F, a[j], b[j]);
  } else if (sa == 1 && sb == 0) {
    const T bv = *b;
    for (std::int64_t j = 0; j < n; ++j) y[j] = math::apply_binary(F, a[j], bv);
  } else if (sa == 0 && sb == 1) {
    const T av = *a;
    for (std::int64_t j = 0; j < n; ++j) y[j] = math::apply_binary(F, av, b[j]);
  } else {
    for (std::int64_t j = 0; j < n; ++j) y[j] = math::apply_binary(F, a[j * sa], b[j * sb]);
  }
}

template <class T>
void unary_map(const T* x, T* y, std::int64_t n, UnaryFn fn, UnaryParams params, CpuContext& cpu) {
  const auto tasks = static_cast<std::size_t>((n + chunk - 1) / chunk);
  with_unary(fn, [&]<UnaryFn F>() {
    cpu.pool().parallel_for(tasks, [&](std::size_t task) {
      const std::int64_t begin = static_cast<std::int64_t>(task) * chunk;
      const std::int64_t end = std::min(n, begin + chunk);
      for (std::int64_t i = begin; i < end; ++i) y[i] = math::apply_unary(F, x[i], params);
    });
  });
}
// Calls visit(i, offsets) for element i of `shape` (row-major) with its offset in each of `views`
// (strided, stride 0 on broadcast dims), for the elements [begin, end).
template <std::size_t N, class Visit>
void walk_broadcast(const ConcreteShape& shape, const std::array<const ConcreteShape*, N>& strides, std::int64_t begin,
                    std::int64_t end, Visit visit) {
  const std::size_t rank = shape.rank();
  std::int64_t index[max_rank] = {};
  std::array<std::int64_t, N> offsets{};
  std::int64_t rest = begin;
  for (std::size_t d = rank; d-- > 0;) {
    index[d] = rest % shape[d];
    rest /= shape[d];
    for (std::size_t v = 0; v < N; ++v) offsets[v] += index[d] * (*strides[v])[d];
  }
  for (std::int64_t i = begin; i < end; ++i) {
    visit(i, offsets);
    for (std::size_t d = rank; d-- > 0;) {  // odometer
      for (std::size_t v = 0; v < N; ++v) offsets[v] += (*strides[v])[d];
      if (++index[d] < shape[d]) break;
      for (std::size_t v = 0; v < N; ++v) offsets[v] -= (*strides[v])[d] * shape[d];
      index[d] = 0;
    }
  }
}
}  // namespace

template <CpuReal T>
void apply_unary_inplace(const TensorView<T>& y, UnaryFn fn, UnaryParams params, CpuContext& cpu) {
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

template <CpuReal T>
Result<NoState> prepare_kernel(const unary_op<T>&, const UnaryArgs<T>&, CpuContext&) {
  return NoState{};
}

template <CpuReal T>
void run_kernel(const unary_op<T>&, const UnaryArgs<T>& args, NoState&, CpuContext& cpu) {
  unary_map(args.x.data, args.y.data, args.y.numel(), args.fn, args.params, cpu);
}

template <CpuReal T>
Result<NoState> prepare_kernel(const binary_op<T>&, const BinaryArgs<T>&, CpuContext&) {
  return NoState{};
}

template <CpuReal T>
void run_kernel(const binary_op<T>&, const BinaryArgs<T>& args, NoState&, CpuContext& cpu) {
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
      T* y = args.y.data;
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

template <CpuReal T>
Result<NoState> prepare_kernel(const dropout_op<T>&, const DropoutArgs<T>&, CpuContext&) {
  return NoState{};
}

template <CpuReal T>
void run_kernel(const dropout_op<T>&, const DropoutArgs<T>& args, NoState&, CpuContext& cpu) {
  const std::int64_t n = args.y.numel();
  const RunPhase phase = cpu.phase();
  const bool active = phase.training && args.p > 0;
  // p = 1 drops everything (PyTorch's output is then all zeros, not a division by zero).
  const T scale = args.p < 1 ? static_cast<T>(1.0 / (1.0 - args.p)) : T(0);
  parallel_chunks(cpu, n, 1, [&](std::int64_t begin, std::int64_t end) {
    const T* x = args.x.data;
    T* y = args.y.data;
    if (!active) {
      for (std::int64_t i = begin; i < end; ++i) y[i] = x[i];
      return;
    }
    for (std::int64_t i = begin; i < end; ++i) {
      const bool keep = math::dropout_keeps(args.p, phase.seed, phase.step, args.stream, static_cast<std::uint64_t>(i));
      y[i] = keep ? x[i] * scale : T(0);
    }
  });
}

#if TEENY_TRAINING
template <CpuReal T>
void epilogue_backward(const Epilogue& e, const TensorView<T>& dy, const TensorView<const std::type_identity_t<T>>& y,
                       CpuContext& cpu) {
  if (!e.active) return;
  with_unary(e.fn, [&]<UnaryFn A>() {
    parallel_chunks(cpu, dy.numel(), 1, [&](std::int64_t begin, std::int64_t end) {
      T* __restrict g = dy.data;
      const T* __restrict v = y.data;
      for (std::int64_t i = begin; i < end; ++i) g[i] *= math::unary_derivative_from_output(A, v[i], e.params);
    });
  });
}

template <CpuReal T>
Result<NoState> prepare_backward_kernel(const unary_op<T>&, const InputGradArgs<UnaryArgs<T>, T>&, CpuContext&) {
  return NoState{};
}

template <CpuReal T>
void run_backward_kernel(const unary_op<T>&, const InputGradArgs<UnaryArgs<T>, T>& g, NoState&, CpuContext& cpu) {
  if (g.dx.data == nullptr) return;
  const UnaryArgs<T>& f = g.forward;
  with_unary(f.fn, [&]<UnaryFn F>() {
    parallel_chunks(cpu, g.dy.numel(), 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) {
        g.dx.data[i] += g.dy.data[i] * math::unary_derivative(F, f.x.data[i], f.y.data[i], f.params);
      }
    });
  });
}

template <CpuReal T>
Result<NoState> prepare_backward_kernel(const binary_op<T>&, const BinaryBackwardArgs<T>&, CpuContext&) {
  return NoState{};
}

template <CpuReal T>
void run_backward_kernel(const binary_op<T>&, const BinaryBackwardArgs<T>& g, NoState&, CpuContext& cpu) {
  const BinaryArgs<T>& f = g.forward;
  epilogue_backward(f.epilogue, g.dy, f.y, cpu);
  const ConcreteShape& shape = f.y.shape;
  const std::size_t rank = shape.rank();
  const std::int64_t numel = shape.numel();
  // The partials read fn(a, b), which y holds unless an activation was fused after it.
  const auto partials = [&](std::int64_t i, std::int64_t oa, std::int64_t ob) {
    const T a = f.a.data[oa];
    const T b = f.b.data[ob];
    return math::binary_partials(f.fn, a, b, f.epilogue.active ? math::apply_binary(f.fn, a, b) : f.y.data[i]);
  };
  // Operands of y's own shape (a residual add): independent elements, in parallel.
  const bool flat = f.a.is_contiguous() && f.b.is_contiguous() && f.a.shape == shape && f.b.shape == shape;
  if (flat) {
    parallel_chunks(cpu, numel, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) {
        const auto d = partials(i, i, i);
        if (g.da.data != nullptr) g.da.data[i] += g.dy.data[i] * d.da;
        if (g.db.data != nullptr) g.db.data[i] += g.dy.data[i] * d.db;
      }
    });
    return;
  }
  // A broadcast operand's gradient sums over the dims it was repeated along: several elements of y
  // add into one of da, so this runs on one thread, in y's order (deterministic sums).
  std::int64_t index[max_rank] = {};
  std::int64_t oa = 0;
  std::int64_t ob = 0;
  for (std::int64_t i = 0; i < numel; ++i) {
    const auto d = partials(i, oa, ob);
    if (g.da.data != nullptr) g.da.data[oa] += g.dy.data[i] * d.da;
    if (g.db.data != nullptr) g.db.data[ob] += g.dy.data[i] * d.db;
    for (std::size_t axis = rank; axis-- > 0;) {  // next multi-index, odometer style
      oa += f.a.strides[axis];
      ob += f.b.strides[axis];
      if (++index[axis] < shape[axis]) break;
      oa -= f.a.strides[axis] * shape[axis];
      ob -= f.b.strides[axis] * shape[axis];
      index[axis] = 0;
    }
  }
}

template <CpuReal T>
Result<NoState> prepare_backward_kernel(const dropout_op<T>&, const InputGradArgs<DropoutArgs<T>, T>&, CpuContext&) {
  return NoState{};
}

template <CpuReal T>
void run_backward_kernel(const dropout_op<T>&, const InputGradArgs<DropoutArgs<T>, T>& g, NoState&, CpuContext& cpu) {
  if (g.dx.data == nullptr) return;
  const RunPhase phase = cpu.phase();
  const double p = g.forward.p;
  const bool active = phase.training && p > 0;
  const T scale = p < 1 ? static_cast<T>(1.0 / (1.0 - p)) : T(0);
  parallel_chunks(cpu, g.dy.numel(), 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      if (!active) {
        g.dx.data[i] += g.dy.data[i];
      } else if (math::dropout_keeps(p, phase.seed, phase.step, g.forward.stream, static_cast<std::uint64_t>(i))) {
        g.dx.data[i] += g.dy.data[i] * scale;
      }
    }
  });
}
#endif

template <CpuReal T>
Result<NoState> prepare_kernel(const compare_op<T>&, const CompareArgs<T>&, CpuContext&) {
  return NoState{};
}

template <CpuReal T>
void run_kernel(const compare_op<T>&, const CompareArgs<T>& a, NoState&, CpuContext& cpu) {
  const ConcreteShape& shape = a.y.shape;
  parallel_chunks(cpu, shape.numel(), 1, [&](std::int64_t begin, std::int64_t end) {
    walk_broadcast<2>(shape, {&a.a.strides, &a.b.strides}, begin, end, [&](std::int64_t i, const auto& o) {
      a.y.data[i] = math::apply_compare(a.fn, a.a.data[o[0]], a.b.data[o[1]]);
    });
  });
}

template <CpuReal T>
Result<NoState> prepare_kernel(const where_op<T>&, const WhereArgs<T>&, CpuContext&) {
  return NoState{};
}

template <CpuReal T>
void run_kernel(const where_op<T>&, const WhereArgs<T>& a, NoState&, CpuContext& cpu) {
  const ConcreteShape& shape = a.y.shape;
  parallel_chunks(cpu, shape.numel(), 1, [&](std::int64_t begin, std::int64_t end) {
    walk_broadcast<3>(shape, {&a.condition.strides, &a.x.strides, &a.other.strides}, begin, end,
                      [&](std::int64_t i, const auto& o) {
                        a.y.data[i] = a.condition.data[o[0]] ? a.x.data[o[1]] : a.other.data[o[2]];
                      });
  });
}

// Every kernel above compiled here, once per element type: importers call these instances.
#define TEENY_CPU_INSTANCES(T)                                                                       \
  template Result<NoState> prepare_kernel(const unary_op<T>&, const UnaryArgs<T>&, CpuContext&);     \
  template void run_kernel(const unary_op<T>&, const UnaryArgs<T>&, NoState&, CpuContext&);          \
  template Result<NoState> prepare_kernel(const binary_op<T>&, const BinaryArgs<T>&, CpuContext&);   \
  template void run_kernel(const binary_op<T>&, const BinaryArgs<T>&, NoState&, CpuContext&);        \
  template Result<NoState> prepare_kernel(const dropout_op<T>&, const DropoutArgs<T>&, CpuContext&); \
  template void run_kernel(const dropout_op<T>&, const DropoutArgs<T>&, NoState&, CpuContext&);      \
  template void apply_unary_inplace(const TensorView<T>&, UnaryFn, UnaryParams, CpuContext&);        \
  template Result<NoState> prepare_kernel(const compare_op<T>&, const CompareArgs<T>&, CpuContext&); \
  template void run_kernel(const compare_op<T>&, const CompareArgs<T>&, NoState&, CpuContext&);      \
  template Result<NoState> prepare_kernel(const where_op<T>&, const WhereArgs<T>&, CpuContext&);     \
  template void run_kernel(const where_op<T>&, const WhereArgs<T>&, NoState&, CpuContext&);          \
  TEENY_CPU_BACKWARD_INSTANCES(T)
#if TEENY_TRAINING
#define TEENY_CPU_BACKWARD_INSTANCES(T)                                                                                \
  template Result<NoState> prepare_backward_kernel(const unary_op<T>&, const InputGradArgs<UnaryArgs<T>, T>&,          \
                                                   CpuContext&);                                                       \
  template void run_backward_kernel(const unary_op<T>&, const InputGradArgs<UnaryArgs<T>, T>&, NoState&, CpuContext&); \
  template Result<NoState> prepare_backward_kernel(const binary_op<T>&, const BinaryBackwardArgs<T>&, CpuContext&);    \
  template void run_backward_kernel(const binary_op<T>&, const BinaryBackwardArgs<T>&, NoState&, CpuContext&);         \
  template Result<NoState> prepare_backward_kernel(const dropout_op<T>&, const InputGradArgs<DropoutArgs<T>, T>&,      \
                                                   CpuContext&);                                                       \
  template void run_backward_kernel(const dropout_op<T>&, const InputGradArgs<DropoutArgs<T>, T>&, NoState&,           \
                                    CpuContext&);                                                                      \
  template void epilogue_backward(const Epilogue&, const TensorView<T>&, const TensorView<const T>&, CpuContext&);
#else
#define TEENY_CPU_BACKWARD_INSTANCES(T)
#endif
TEENY_CPU_INSTANCES(float)
TEENY_CPU_INSTANCES(double)
#undef TEENY_CPU_INSTANCES
#undef TEENY_CPU_BACKWARD_INSTANCES

}  // namespace teeny
