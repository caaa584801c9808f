// teeny.cpu:shape — CPU kernels of the data-movement ops: reshape (a memcpy), permute / slice /
// concat / weight (one strided copy), pad, nearest upsampling and cast, and (training builds) their
// backward. Index rules and conversions are kernels/math/shape.hpp.
module;
#include "math/gradient.hpp"
#include "math/shape.hpp"
export module teeny.cpu:shape;
import teeny.std;
import teeny.core;
import teeny.ops;
import :context;

export namespace teeny {

// Templates over the element type, compiled here for float and double (see the end of the file).
template <CpuReal T>
Result<NoState> prepare_kernel(const reshape_op<T>& op, const CopyArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_kernel(const reshape_op<T>& op, const CopyArgs<T>& args, NoState& state, CpuContext& cpu);

#if TEENY_TRAINING
template <class T>
using StridedCopyGradArgs = InputGradArgs<StridedCopyArgs<T>, T>;
template <CpuReal T>
Result<NoState> prepare_backward_kernel(const permute_op<T>& op, const StridedCopyGradArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_backward_kernel(const permute_op<T>& op, const StridedCopyGradArgs<T>& args, NoState& state, CpuContext& cpu);
template <CpuReal T>
Result<NoState> prepare_backward_kernel(const slice_op<T>& op, const StridedCopyGradArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_backward_kernel(const slice_op<T>& op, const StridedCopyGradArgs<T>& args, NoState& state, CpuContext& cpu);
template <CpuReal T>
Result<NoState> prepare_backward_kernel(const concat_op<T>& op, const StridedCopyGradArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_backward_kernel(const concat_op<T>& op, const StridedCopyGradArgs<T>& args, NoState& state, CpuContext& cpu);
template <CpuReal T>
Result<NoState> prepare_backward_kernel(const weight_op<T>& op, const StridedCopyGradArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_backward_kernel(const weight_op<T>& op, const StridedCopyGradArgs<T>& args, NoState& state, CpuContext& cpu);
template <CpuReal T>
Result<NoState> prepare_backward_kernel(const reshape_op<T>& op, const InputGradArgs<CopyArgs<T>, T>& args,
                                        CpuContext& cpu);
template <CpuReal T>
void run_backward_kernel(const reshape_op<T>& op, const InputGradArgs<CopyArgs<T>, T>& args, NoState& state,
                         CpuContext& cpu);
#endif

template <CpuReal T>
Result<NoState> prepare_kernel(const weight_op<T>& op, const StridedCopyArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_kernel(const weight_op<T>& op, const StridedCopyArgs<T>& args, NoState& state, CpuContext& cpu);
template <CpuReal T>
Result<NoState> prepare_kernel(const permute_op<T>& op, const StridedCopyArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_kernel(const permute_op<T>& op, const StridedCopyArgs<T>& args, NoState& state, CpuContext& cpu);
template <CpuReal T>
Result<NoState> prepare_kernel(const slice_op<T>& op, const StridedCopyArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_kernel(const slice_op<T>& op, const StridedCopyArgs<T>& args, NoState& state, CpuContext& cpu);
template <CpuReal T>
Result<NoState> prepare_kernel(const concat_op<T>& op, const StridedCopyArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_kernel(const concat_op<T>& op, const StridedCopyArgs<T>& args, NoState& state, CpuContext& cpu);

template <CpuReal T>
Result<NoState> prepare_kernel(const pad_op<T>& op, const PadArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_kernel(const pad_op<T>& op, const PadArgs<T>& args, NoState& state, CpuContext& cpu);

/// The input row and column each output row and column of a nearest upsampling reads.
struct UpsampleState {
  std::vector<std::int64_t> src_h;
  std::vector<std::int64_t> src_w;
};
template <CpuReal T>
Result<UpsampleState> prepare_kernel(const upsample_op<T>& op, const UpsampleArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_kernel(const upsample_op<T>& op, const UpsampleArgs<T>& args, UpsampleState& state, CpuContext& cpu);

template <CpuReal T>
Result<NoState> prepare_kernel(const cast_op<T>& op, const CastArgs& args, CpuContext& cpu);
template <CpuReal T>
void run_kernel(const cast_op<T>& op, const CastArgs& args, NoState& state, CpuContext& cpu);

#if TEENY_TRAINING
template <CpuReal T>
Result<NoState> prepare_backward_kernel(const pad_op<T>& op, const InputGradArgs<PadArgs<T>, T>& args, CpuContext& cpu);
template <CpuReal T>
void run_backward_kernel(const pad_op<T>& op, const InputGradArgs<PadArgs<T>, T>& args, NoState& state,
                         CpuContext& cpu);
/// The same source tables as the forward's: dy is added back along them.
template <CpuReal T>
Result<UpsampleState> prepare_backward_kernel(const upsample_op<T>& op, const InputGradArgs<UpsampleArgs<T>, T>& args,
                                              CpuContext& cpu);
template <CpuReal T>
void run_backward_kernel(const upsample_op<T>& op, const InputGradArgs<UpsampleArgs<T>, T>& args, UpsampleState& state,
                         CpuContext& cpu);
template <CpuReal T>
Result<NoState> prepare_backward_kernel(const cast_op<T>& op, const CastBackwardArgs& args, CpuContext& cpu);
template <CpuReal T>
void run_backward_kernel(const cast_op<T>& op, const CastBackwardArgs& args, NoState& state, CpuContext& cpu);
#endif

}  // namespace teeny

namespace teeny {
namespace {
constexpr std::int64_t chunk = 1 << 14;  // elements per task: big enough to amortise a wake-up

// Rows of `inner` elements per task, and the task count, for `rows` rows.
struct Tasks {
  std::int64_t per_task = 1;
  std::size_t count = 0;
};
Tasks split_rows(std::int64_t rows, std::int64_t inner) {
  Tasks t;
  t.per_task = std::max<std::int64_t>(1, chunk / std::max<std::int64_t>(inner, 1));
  t.count = static_cast<std::size_t>((rows + t.per_task - 1) / t.per_task);
  return t;
}

// y = x elementwise over one shape, each read or written through its own strides. Dims are merged
// where both views are evenly spaced across them; rows of the innermost dim go to the pool.
template <class T>
void strided_copy(const TensorView<const T>& x, const TensorView<T>& y, CpuContext& cpu) {
  if (y.numel() == 0) return;
  std::int64_t shape[max_rank];
  std::int64_t sx[max_rank];
  std::int64_t sy[max_rank];
  std::size_t rank = 0;
  for (std::size_t d = 0; d < y.rank(); ++d) {
    const std::int64_t n = y.shape[d];
    if (n == 1) continue;
    if (rank > 0 && sx[rank - 1] == x.strides[d] * n && sy[rank - 1] == y.strides[d] * n) {
      shape[rank - 1] *= n;
    } else {
      shape[rank] = n;
      ++rank;
    }
    sx[rank - 1] = x.strides[d];
    sy[rank - 1] = y.strides[d];
  }
  if (rank == 0) {
    *y.data = *x.data;
    return;
  }
  const std::int64_t inner = shape[rank - 1];
  const std::int64_t ix = sx[rank - 1];
  const std::int64_t iy = sy[rank - 1];
  const std::int64_t rows = y.numel() / inner;
  const Tasks tasks = split_rows(rows, inner);
  cpu.pool().parallel_for(tasks.count, [&](std::size_t task) {
    const std::int64_t first = static_cast<std::int64_t>(task) * tasks.per_task;
    const std::int64_t last = std::min(rows, first + tasks.per_task);
    for (std::int64_t row = first; row < last; ++row) {
      std::int64_t rest = row;
      std::int64_t ox = 0;
      std::int64_t oy = 0;
      for (std::size_t d = rank - 1; d-- > 0;) {
        const std::int64_t coordinate = rest % shape[d];
        rest /= shape[d];
        ox += coordinate * sx[d];
        oy += coordinate * sy[d];
      }
      const T* src = x.data + ox;
      T* dst = y.data + oy;
      if (ix == 1 && iy == 1) {
        std::memcpy(dst, src, sizeof(T) * static_cast<std::size_t>(inner));
      } else {
        for (std::int64_t j = 0; j < inner; ++j) dst[j * iy] = src[j * ix];
      }
    }
  });
}
}  // namespace

template <CpuReal T>
Result<NoState> prepare_kernel(const reshape_op<T>&, const CopyArgs<T>&, CpuContext&) {
  return NoState{};
}

template <CpuReal T>
void run_kernel(const reshape_op<T>&, const CopyArgs<T>& args, NoState&, CpuContext&) {
  if (args.x.data != args.y.data) std::memcpy(args.y.data, args.x.data, sizeof(T) * args.y.numel());
}

template <CpuReal T>
Result<NoState> prepare_kernel(const weight_op<T>&, const StridedCopyArgs<T>&, CpuContext&) {
  return NoState{};
}
template <CpuReal T>
void run_kernel(const weight_op<T>&, const StridedCopyArgs<T>& args, NoState&, CpuContext& cpu) {
  strided_copy(args.x, args.y, cpu);  // the value's stride 0 along broadcast dims repeats it
}
template <CpuReal T>
Result<NoState> prepare_kernel(const permute_op<T>&, const StridedCopyArgs<T>&, CpuContext&) {
  return NoState{};
}
template <CpuReal T>
void run_kernel(const permute_op<T>&, const StridedCopyArgs<T>& args, NoState&, CpuContext& cpu) {
  strided_copy(args.x, args.y, cpu);
}
template <CpuReal T>
Result<NoState> prepare_kernel(const slice_op<T>&, const StridedCopyArgs<T>&, CpuContext&) {
  return NoState{};
}
template <CpuReal T>
void run_kernel(const slice_op<T>&, const StridedCopyArgs<T>& args, NoState&, CpuContext& cpu) {
  strided_copy(args.x, args.y, cpu);
}
template <CpuReal T>
Result<NoState> prepare_kernel(const concat_op<T>&, const StridedCopyArgs<T>&, CpuContext&) {
  return NoState{};
}
template <CpuReal T>
void run_kernel(const concat_op<T>&, const StridedCopyArgs<T>& args, NoState&, CpuContext& cpu) {
  strided_copy(args.x, args.y, cpu);
}

template <CpuReal T>
Result<NoState> prepare_kernel(const pad_op<T>&, const PadArgs<T>&, CpuContext&) {
  return NoState{};
}

template <CpuReal T>
void run_kernel(const pad_op<T>&, const PadArgs<T>& args, NoState&, CpuContext& cpu) {
  const TensorView<const T>& x = args.x;
  const TensorView<T>& y = args.y;
  const std::size_t rank = y.rank();
  if (y.numel() == 0) return;
  if (rank == 0) {
    *y.data = *x.data;
    return;
  }
  const std::int64_t inner = y.shape[rank - 1];
  const std::int64_t rows = y.numel() / inner;
  const std::int64_t n = x.shape[rank - 1];
  const std::int64_t before = args.before[rank - 1];
  const std::int64_t stride = x.strides[rank - 1];
  const math::PadKind kind = args.kind;
  const T value = args.value;
  // The columns [lo, hi) that read the input row; constant padding fills the rest.
  const std::int64_t lo = std::clamp<std::int64_t>(before, 0, inner);
  const std::int64_t hi = std::clamp<std::int64_t>(before + n, lo, inner);
  const Tasks tasks = split_rows(rows, inner);
  cpu.pool().parallel_for(tasks.count, [&](std::size_t task) {
    const std::int64_t first = static_cast<std::int64_t>(task) * tasks.per_task;
    const std::int64_t last = std::min(rows, first + tasks.per_task);
    for (std::int64_t row = first; row < last; ++row) {
      T* out = y.data + row * inner;
      std::int64_t rest = row;
      std::int64_t offset = 0;
      bool fill = false;
      for (std::size_t d = rank - 1; d-- > 0;) {
        const std::int64_t source = math::pad_source_index(kind, rest % y.shape[d], args.before[d], x.shape[d]);
        rest /= y.shape[d];
        fill = fill || source < 0;
        offset += source * x.strides[d];
      }
      if (fill) {
        std::fill(out, out + inner, value);
        continue;
      }
      const T* in = x.data + offset;
      if (kind == math::PadKind::constant) {
        std::fill(out, out + lo, value);
        for (std::int64_t j = lo; j < hi; ++j) out[j] = in[(j - before) * stride];
        std::fill(out + hi, out + inner, value);
      } else {
        for (std::int64_t j = 0; j < inner; ++j) out[j] = in[math::pad_source_index(kind, j, before, n) * stride];
      }
    }
  });
}

template <CpuReal T>
Result<UpsampleState> prepare_kernel(const upsample_op<T>&, const UpsampleArgs<T>& args, CpuContext&) {
  UpsampleState state;
  const std::int64_t h = args.x.shape[2];
  const std::int64_t w = args.x.shape[3];
  for (std::int64_t o = 0; o < args.y.shape[2]; ++o) {
    state.src_h.push_back(math::nearest_source_index(o, h, args.y.shape[2], args.inv_scale_h));
  }
  for (std::int64_t o = 0; o < args.y.shape[3]; ++o) {
    state.src_w.push_back(math::nearest_source_index(o, w, args.y.shape[3], args.inv_scale_w));
  }
  return state;
}

template <CpuReal T>
void run_kernel(const upsample_op<T>&, const UpsampleArgs<T>& args, UpsampleState& state, CpuContext& cpu) {
  const TensorView<const T>& x = args.x;
  const std::int64_t channels = args.y.shape[1];
  const std::int64_t oh = args.y.shape[2];
  const std::int64_t ow = args.y.shape[3];
  const std::int64_t rows = args.y.shape[0] * channels * oh;
  if (rows == 0 || ow == 0) return;
  const Tasks tasks = split_rows(rows, ow);
  cpu.pool().parallel_for(tasks.count, [&](std::size_t task) {
    const std::int64_t first = static_cast<std::int64_t>(task) * tasks.per_task;
    const std::int64_t last = std::min(rows, first + tasks.per_task);
    for (std::int64_t row = first; row < last; ++row) {
      const std::int64_t plane = row / oh;
      const T* in = x.data + (plane / channels) * x.strides[0] + (plane % channels) * x.strides[1] +
                    state.src_h[static_cast<std::size_t>(row % oh)] * x.strides[2];
      T* out = args.y.data + row * ow;
      for (std::int64_t j = 0; j < ow; ++j) out[j] = in[state.src_w[static_cast<std::size_t>(j)] * x.strides[3]];
    }
  });
}

template <CpuReal T>
Result<NoState> prepare_kernel(const cast_op<T>&, const CastArgs&, CpuContext&) {
  return NoState{};
}

template <CpuReal T>
void run_kernel(const cast_op<T>&, const CastArgs& args, NoState&, CpuContext& cpu) {
  const std::int64_t n = args.n;
  const Tasks tasks = split_rows(n, 1);
  // One loop per (from, to) pair, the conversion known at compile time.
  visit_dtype(args.from, [&]<class From>(std::type_identity<From>) {
    visit_dtype(args.to, [&]<class To>(std::type_identity<To>) {
      const auto* x = static_cast<const From*>(args.x);
      auto* y = static_cast<To*>(args.y);
      cpu.pool().parallel_for(tasks.count, [&](std::size_t task) {
        const std::int64_t first = static_cast<std::int64_t>(task) * tasks.per_task;
        const std::int64_t last = std::min(n, first + tasks.per_task);
        for (std::int64_t i = first; i < last; ++i) y[i] = math::cast_element<To>(x[i]);
      });
    });
  });
}

#if TEENY_TRAINING
template <CpuReal T>
Result<NoState> prepare_backward_kernel(const reshape_op<T>&, const InputGradArgs<CopyArgs<T>, T>&, CpuContext&) {
  return NoState{};
}

namespace {
// dx += dy, both read through their strides over dy's shape (the transpose of a strided copy), in
// order on one thread.
template <class T>
void strided_add(const StridedCopyGradArgs<T>& g) {
  if (g.dx.data == nullptr) return;
  const ConcreteShape& shape = g.dy.shape;
  const std::size_t rank = shape.rank();
  const std::int64_t numel = shape.numel();
  std::int64_t index[max_rank] = {};
  std::int64_t ox = 0;
  std::int64_t oy = 0;
  for (std::int64_t i = 0; i < numel; ++i) {
    g.dx.data[ox] += g.dy.data[oy];
    for (std::size_t axis = rank; axis-- > 0;) {  // next multi-index, odometer style
      ox += g.dx.strides[axis];
      oy += g.dy.strides[axis];
      if (++index[axis] < shape[axis]) break;
      ox -= g.dx.strides[axis] * shape[axis];
      oy -= g.dy.strides[axis] * shape[axis];
      index[axis] = 0;
    }
  }
}
}  // namespace

template <CpuReal T>
Result<NoState> prepare_backward_kernel(const weight_op<T>&, const StridedCopyGradArgs<T>&, CpuContext&) {
  return NoState{};
}
template <CpuReal T>
void run_backward_kernel(const weight_op<T>&, const StridedCopyGradArgs<T>& g, NoState&, CpuContext&) {
  strided_add(g);  // in order on one thread, so the broadcast gradient's repeated elements sum safely
}
template <CpuReal T>
Result<NoState> prepare_backward_kernel(const permute_op<T>&, const StridedCopyGradArgs<T>&, CpuContext&) {
  return NoState{};
}
template <CpuReal T>
void run_backward_kernel(const permute_op<T>&, const StridedCopyGradArgs<T>& g, NoState&, CpuContext&) {
  strided_add(g);
}
template <CpuReal T>
Result<NoState> prepare_backward_kernel(const slice_op<T>&, const StridedCopyGradArgs<T>&, CpuContext&) {
  return NoState{};
}
template <CpuReal T>
void run_backward_kernel(const slice_op<T>&, const StridedCopyGradArgs<T>& g, NoState&, CpuContext&) {
  strided_add(g);
}
template <CpuReal T>
Result<NoState> prepare_backward_kernel(const concat_op<T>&, const StridedCopyGradArgs<T>&, CpuContext&) {
  return NoState{};
}
template <CpuReal T>
void run_backward_kernel(const concat_op<T>&, const StridedCopyGradArgs<T>& g, NoState&, CpuContext&) {
  strided_add(g);
}

template <CpuReal T>
void run_backward_kernel(const reshape_op<T>&, const InputGradArgs<CopyArgs<T>, T>& g, NoState&, CpuContext&) {
  if (g.dx.data == nullptr) return;
  const std::int64_t n = g.dy.numel();
  for (std::int64_t i = 0; i < n; ++i) g.dx.data[i] += g.dy.data[i];
}

namespace {
// dx[source(o)] += dy[o] for every output o that read the input (the transpose of the forward's
// gather). The leading dims that are neither padded nor cropped map output slabs onto disjoint
// slabs of dx, so the pool takes whole slabs; inside one, several outputs may add to one element
// (reflect, replicate) and do so in order.
template <class T>
void pad_backward(const InputGradArgs<PadArgs<T>, T>& g, CpuContext& cpu) {
  const PadArgs<T>& f = g.forward;
  const TensorView<T>& dx = g.dx;
  const ConcreteShape& out = g.dy.shape;
  const std::size_t rank = out.rank();
  if (dx.data == nullptr || out.numel() == 0 || dx.numel() == 0) return;
  if (rank == 0) {
    *dx.data += *g.dy.data;
    return;
  }
  const std::int64_t inner = out[rank - 1];
  const std::int64_t rows = out.numel() / inner;
  std::size_t lead = 0;
  while (lead + 1 < rank && f.before[lead] == 0 && f.x.shape[lead] == out[lead]) ++lead;
  std::int64_t slabs = 1;
  for (std::size_t d = 0; d < lead; ++d) slabs *= out[d];
  const std::int64_t rows_per_slab = rows / slabs;
  const std::int64_t n = f.x.shape[rank - 1];
  const std::int64_t before = f.before[rank - 1];
  const std::int64_t stride = dx.strides[rank - 1];
  const math::PadKind kind = f.kind;
  const std::int64_t lo = std::clamp<std::int64_t>(before, 0, inner);
  const std::int64_t hi = std::clamp<std::int64_t>(before + n, lo, inner);
  const Tasks tasks = split_rows(slabs, rows_per_slab * inner);
  cpu.pool().parallel_for(tasks.count, [&](std::size_t task) {
    const std::int64_t first = static_cast<std::int64_t>(task) * tasks.per_task * rows_per_slab;
    const std::int64_t last = std::min(slabs, (static_cast<std::int64_t>(task) + 1) * tasks.per_task) * rows_per_slab;
    for (std::int64_t row = first; row < last; ++row) {
      std::int64_t rest = row;
      std::int64_t offset = 0;
      bool filled = false;  // the whole row was constant fill (or cropped away): no gradient
      for (std::size_t d = rank - 1; d-- > 0;) {
        const std::int64_t source = math::pad_source_index(kind, rest % out[d], f.before[d], f.x.shape[d]);
        rest /= out[d];
        filled = filled || source < 0;
        offset += source * dx.strides[d];
      }
      if (filled) continue;
      const T* in = g.dy.data + row * inner;
      T* grad = dx.data + offset;
      if (kind == math::PadKind::constant) {
        for (std::int64_t j = lo; j < hi; ++j) grad[(j - before) * stride] += in[j];
      } else {
        for (std::int64_t j = 0; j < inner; ++j) grad[math::pad_source_index(kind, j, before, n) * stride] += in[j];
      }
    }
  });
}

// dx[n, c, src_h[o], src_w[p]] += dy[n, c, o, p]. Planes of dx are disjoint, so the pool takes
// whole planes; inside one, the outputs sharing a source add in order.
template <class T>
void upsample_backward(const InputGradArgs<UpsampleArgs<T>, T>& g, const UpsampleState& state, CpuContext& cpu) {
  const TensorView<T>& dx = g.dx;
  if (dx.data == nullptr) return;
  const std::int64_t channels = g.dy.shape[1];
  const std::int64_t oh = g.dy.shape[2];
  const std::int64_t ow = g.dy.shape[3];
  const std::int64_t planes = g.dy.shape[0] * channels;
  if (planes == 0 || oh * ow == 0) return;
  const Tasks tasks = split_rows(planes, oh * ow);
  cpu.pool().parallel_for(tasks.count, [&](std::size_t task) {
    const std::int64_t first = static_cast<std::int64_t>(task) * tasks.per_task;
    const std::int64_t last = std::min(planes, first + tasks.per_task);
    for (std::int64_t plane = first; plane < last; ++plane) {
      T* grad = dx.data + (plane / channels) * dx.strides[0] + (plane % channels) * dx.strides[1];
      for (std::int64_t o = 0; o < oh; ++o) {
        T* grad_row = grad + state.src_h[static_cast<std::size_t>(o)] * dx.strides[2];
        const T* in = g.dy.data + (plane * oh + o) * ow;
        for (std::int64_t j = 0; j < ow; ++j)
          grad_row[state.src_w[static_cast<std::size_t>(j)] * dx.strides[3]] += in[j];
      }
    }
  });
}

// dx[i] += dy[i] converted back to x's dtype, for a cast between floating dtypes From -> To.
template <class From, class To>
void cast_backward(From* dx, const To* dy, std::int64_t n, CpuContext& cpu) {
  const Tasks tasks = split_rows(n, 1);
  cpu.pool().parallel_for(tasks.count, [&](std::size_t task) {
    const std::int64_t first = static_cast<std::int64_t>(task) * tasks.per_task;
    const std::int64_t last = std::min(n, first + tasks.per_task);
    for (std::int64_t i = first; i < last; ++i) dx[i] = math::cast_gradient_add(dx[i], dy[i]);
  });
}
}  // namespace

template <CpuReal T>
Result<NoState> prepare_backward_kernel(const pad_op<T>&, const InputGradArgs<PadArgs<T>, T>&, CpuContext&) {
  return NoState{};
}
template <CpuReal T>
void run_backward_kernel(const pad_op<T>&, const InputGradArgs<PadArgs<T>, T>& g, NoState&, CpuContext& cpu) {
  pad_backward(g, cpu);
}

template <CpuReal T>
Result<UpsampleState> prepare_backward_kernel(const upsample_op<T>& op, const InputGradArgs<UpsampleArgs<T>, T>& g,
                                              CpuContext& cpu) {
  return prepare_kernel(op, g.forward, cpu);
}
template <CpuReal T>
void run_backward_kernel(const upsample_op<T>&, const InputGradArgs<UpsampleArgs<T>, T>& g, UpsampleState& state,
                         CpuContext& cpu) {
  upsample_backward(g, state, cpu);
}

template <CpuReal T>
Result<NoState> prepare_backward_kernel(const cast_op<T>&, const CastBackwardArgs&, CpuContext&) {
  return NoState{};
}
template <CpuReal T>
void run_backward_kernel(const cast_op<T>&, const CastBackwardArgs& g, NoState&, CpuContext& cpu) {
  if (g.dx == nullptr) return;
  // One loop per floating (from, to) pair; pack_backward_args refused any other.
  visit_dtype(g.forward.from, [&]<class From>(std::type_identity<From>) {
    visit_dtype(g.forward.to, [&]<class To>(std::type_identity<To>) {
      if constexpr (FloatElement<From> && FloatElement<To>) {
        cast_backward(static_cast<From*>(g.dx), static_cast<const To*>(g.dy), g.forward.n, cpu);
      }
    });
  });
}
#endif

// Every kernel above compiled here, once per element type: importers call these instances.
#define TEENY_CPU_INSTANCES(T)                                                                               \
  template Result<NoState> prepare_kernel(const reshape_op<T>&, const CopyArgs<T>&, CpuContext&);            \
  template void run_kernel(const reshape_op<T>&, const CopyArgs<T>&, NoState&, CpuContext&);                 \
  template Result<NoState> prepare_kernel(const weight_op<T>&, const StridedCopyArgs<T>&, CpuContext&);      \
  template void run_kernel(const weight_op<T>&, const StridedCopyArgs<T>&, NoState&, CpuContext&);           \
  template Result<NoState> prepare_kernel(const permute_op<T>&, const StridedCopyArgs<T>&, CpuContext&);     \
  template void run_kernel(const permute_op<T>&, const StridedCopyArgs<T>&, NoState&, CpuContext&);          \
  template Result<NoState> prepare_kernel(const slice_op<T>&, const StridedCopyArgs<T>&, CpuContext&);       \
  template void run_kernel(const slice_op<T>&, const StridedCopyArgs<T>&, NoState&, CpuContext&);            \
  template Result<NoState> prepare_kernel(const concat_op<T>&, const StridedCopyArgs<T>&, CpuContext&);      \
  template void run_kernel(const concat_op<T>&, const StridedCopyArgs<T>&, NoState&, CpuContext&);           \
  template Result<NoState> prepare_kernel(const pad_op<T>&, const PadArgs<T>&, CpuContext&);                 \
  template void run_kernel(const pad_op<T>&, const PadArgs<T>&, NoState&, CpuContext&);                      \
  template Result<UpsampleState> prepare_kernel(const upsample_op<T>&, const UpsampleArgs<T>&, CpuContext&); \
  template void run_kernel(const upsample_op<T>&, const UpsampleArgs<T>&, UpsampleState&, CpuContext&);      \
  template Result<NoState> prepare_kernel(const cast_op<T>&, const CastArgs&, CpuContext&);                  \
  template void run_kernel(const cast_op<T>&, const CastArgs&, NoState&, CpuContext&);                       \
  TEENY_CPU_BACKWARD_INSTANCES(T)
#if TEENY_TRAINING
#define TEENY_CPU_BACKWARD_INSTANCES(T)                                                                               \
  template Result<NoState> prepare_backward_kernel(const reshape_op<T>&, const InputGradArgs<CopyArgs<T>, T>&,        \
                                                   CpuContext&);                                                      \
  template void run_backward_kernel(const reshape_op<T>&, const InputGradArgs<CopyArgs<T>, T>&, NoState&,             \
                                    CpuContext&);                                                                     \
  template Result<NoState> prepare_backward_kernel(const weight_op<T>&, const StridedCopyGradArgs<T>&, CpuContext&);  \
  template void run_backward_kernel(const weight_op<T>&, const StridedCopyGradArgs<T>&, NoState&, CpuContext&);       \
  template Result<NoState> prepare_backward_kernel(const permute_op<T>&, const StridedCopyGradArgs<T>&, CpuContext&); \
  template void run_backward_kernel(const permute_op<T>&, const StridedCopyGradArgs<T>&, NoState&, CpuContext&);      \
  template Result<NoState> prepare_backward_kernel(const slice_op<T>&, const StridedCopyGradArgs<T>&, CpuContext&);   \
  template void run_backward_kernel(const slice_op<T>&, const StridedCopyGradArgs<T>&, NoState&, CpuContext&);        \
  template Result<NoState> prepare_backward_kernel(const concat_op<T>&, const StridedCopyGradArgs<T>&, CpuContext&);  \
  template void run_backward_kernel(const concat_op<T>&, const StridedCopyGradArgs<T>&, NoState&, CpuContext&);       \
  template Result<NoState> prepare_backward_kernel(const pad_op<T>&, const InputGradArgs<PadArgs<T>, T>&,             \
                                                   CpuContext&);                                                      \
  template void run_backward_kernel(const pad_op<T>&, const InputGradArgs<PadArgs<T>, T>&, NoState&, CpuContext&);    \
  template Result<UpsampleState> prepare_backward_kernel(const upsample_op<T>&,                                       \
                                                         const InputGradArgs<UpsampleArgs<T>, T>&, CpuContext&);      \
  template void run_backward_kernel(const upsample_op<T>&, const InputGradArgs<UpsampleArgs<T>, T>&, UpsampleState&,  \
                                    CpuContext&);                                                                     \
  template Result<NoState> prepare_backward_kernel(const cast_op<T>&, const CastBackwardArgs&, CpuContext&);          \
  template void run_backward_kernel(const cast_op<T>&, const CastBackwardArgs&, NoState&, CpuContext&);
#else
#define TEENY_CPU_BACKWARD_INSTANCES(T)
#endif
TEENY_CPU_INSTANCES(float)
TEENY_CPU_INSTANCES(double)
#undef TEENY_CPU_INSTANCES
#undef TEENY_CPU_BACKWARD_INSTANCES

}  // namespace teeny
