// teeny.cpu:linear — CPU kernels of linear_op (pre-packed weight, fused bias + activation) and
// matmul_op (batched, broadcasting) on the packed, blocked, vectorised SGEMM; in f64, on dgemm.
module;
#include "cpu/kernels/gemm.hpp"
#include "math/elementwise.hpp"
export module teeny.cpu:linear;
import teeny.std;
import teeny.core;
import teeny.model;
import teeny.ops;
import :context;
import :elementwise;

export namespace teeny {

struct LinearState {
  cpu::PackedMatrix weight;  // f32: W^T in the GEMM's layout, packed once per load; f64 reads W as it is
  // f32, one row: the order of the next call's column panels, alternated (see cpu::ColumnOrder).
  cpu::ColumnOrder order = cpu::ColumnOrder::ascending;
};

/// What a linear_op<T> kernel on `rows` rows takes from the CPU context's Memory (see
/// KernelMemory): in f32 the packed weight and the GEMM's workspace; f64 reads W in place.
template <CpuReal T>
constexpr KernelMemory linear_memory(std::size_t rows, std::size_t in, std::size_t out) {
  if constexpr (std::is_same_v<T, double>) {
    return {};
  } else {
    return {block_piece(cpu::packed_bytes_bound(in, out)), 0,
            cpu::gemm_workspace_bytes_bound({rows, out, in}, false, true)};
  }
}

// Templates over the element type, compiled here for float and double (see the end of the file).
template <CpuReal T>
Result<LinearState> prepare_kernel(const linear_op<T>& op, const LinearArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_kernel(const linear_op<T>& op, const LinearArgs<T>& args, LinearState& state, CpuContext& cpu);

template <CpuReal T>
Result<NoState> prepare_kernel(const matmul_op<T>& op, const MatMulArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_kernel(const matmul_op<T>& op, const MatMulArgs<T>& args, NoState& state, CpuContext& cpu);

#if TEENY_TRAINING
/// After the weight changed (an optimizer step): repacks it in place, allocating nothing.
template <CpuReal T>
Result<void> refresh_kernel(const linear_op<T>& op, const LinearArgs<T>& args, LinearState& state, CpuContext& cpu);
template <CpuReal T>
Result<NoState> prepare_backward_kernel(const linear_op<T>& op, const LinearBackwardArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_backward_kernel(const linear_op<T>& op, const LinearBackwardArgs<T>& args, NoState& state, CpuContext& cpu);
template <CpuReal T>
Result<NoState> prepare_backward_kernel(const matmul_op<T>& op, const MatMulBackwardArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_backward_kernel(const matmul_op<T>& op, const MatMulBackwardArgs<T>& args, NoState& state, CpuContext& cpu);
#endif

}  // namespace teeny

namespace teeny {
template <CpuReal T>
Result<LinearState> prepare_kernel(const linear_op<T>& op, const LinearArgs<T>& args, CpuContext& cpu) {
  if constexpr (std::is_same_v<T, double>) {
    return LinearState{};  // dgemm reads W in place and needs no workspace
  } else {
    const auto in = static_cast<std::size_t>(op.attrs.in_features);
    const auto out = static_cast<std::size_t>(op.attrs.out_features);
    LinearState state{cpu::pack_b(in, out, args.weight.data, in, /*trans_b=*/true, cpu.memory())};
    if (!state.weight.ok() && in * out != 0) {
      return fail(Errc::out_of_memory, "cannot pack the ", op.attrs.out_features, "x", op.attrs.in_features, " weight");
    }
    // Whichever worker runs a tile must find its GEMM workspace allocated: size them all now.
    const auto rows = static_cast<std::size_t>(args.x.shape[0]);
    if (!cpu.reserve_gemm_workspace(cpu::gemm_workspace_bytes({rows, out, in}, false, true))) {
      return fail(Errc::out_of_memory, "cannot allocate the GEMM workspace");
    }
    return state;
  }
}

template <CpuReal T>
void run_kernel(const linear_op<T>& op, const LinearArgs<T>& args, LinearState& state, CpuContext& cpu) {
  cpu::GemmEpilogue<T> epilogue;
  epilogue.bias = op.attrs.bias ? args.bias.data : nullptr;
  epilogue.bias_axis = cpu::BiasAxis::column;
  const bool fused = gemm_activation(args.epilogue, epilogue.activation);
  epilogue.slope = static_cast<T>(args.epilogue.params.alpha);
  const auto rows = static_cast<std::size_t>(args.x.shape[0]);
  const auto in = static_cast<std::size_t>(op.attrs.in_features);
  const auto out = static_cast<std::size_t>(op.attrs.out_features);
  if constexpr (std::is_same_v<T, float>) {
    cpu::sgemm({rows, out, in}, args.x.data, in, false, state.weight, args.y.data, out, epilogue, cpu.pool(),
               state.order);
    if (rows == 1) {
      state.order =
          state.order == cpu::ColumnOrder::ascending ? cpu::ColumnOrder::descending : cpu::ColumnOrder::ascending;
    }
  } else {
    cpu::gemm({rows, out, in}, args.x.data, in, false, args.weight.data, in, true, args.y.data, out, epilogue,
              cpu.pool());
  }
  if (!fused) apply_unary_inplace(args.y, args.epilogue.fn, args.epilogue.params, cpu);
}

template <CpuReal T>
Result<NoState> prepare_kernel(const matmul_op<T>&, const MatMulArgs<T>&, CpuContext&) {
  return NoState{};
}

namespace {
// Calls gemm(offset_a, offset_b, index) for every matrix of a batched matmul's output, in order:
// index is the output matrix's, the offsets where its operands are read (batch dims broadcast
// right-aligned: a broadcast operand is read at the same offset by several outputs).
template <class T, class F>
void for_each_matrix(const TensorView<const T>& a, const TensorView<const T>& b, F gemm) {
  const std::size_t ra = a.rank();
  const std::size_t rb = b.rank();
  const std::size_t batch_rank = std::max(ra, rb) - 2;
  ConcreteShape batch;
  for (std::size_t i = 0; i < batch_rank; ++i) {
    const std::int64_t da = i + ra >= batch_rank + 2 ? a.shape[i + ra - 2 - batch_rank] : 1;
    const std::int64_t db = i + rb >= batch_rank + 2 ? b.shape[i + rb - 2 - batch_rank] : 1;
    batch.push_back(da == 1 ? db : da);
  }
  const std::int64_t batches = batch.numel();
  for (std::int64_t index = 0; index < batches; ++index) {
    std::int64_t rest = index;
    std::int64_t offset_a = 0;
    std::int64_t offset_b = 0;
    for (std::size_t i = batch_rank; i-- > 0;) {
      const std::int64_t coordinate = rest % batch[i];
      rest /= batch[i];
      if (i + ra >= batch_rank + 2) {
        const std::size_t axis = i + ra - 2 - batch_rank;
        if (a.shape[axis] != 1) offset_a += coordinate * a.strides[axis];
      }
      if (i + rb >= batch_rank + 2) {
        const std::size_t axis = i + rb - 2 - batch_rank;
        if (b.shape[axis] != 1) offset_b += coordinate * b.strides[axis];
      }
    }
    gemm(offset_a, offset_b, index);
  }
}
}  // namespace

template <CpuReal T>
void run_kernel(const matmul_op<T>&, const MatMulArgs<T>& args, NoState&, CpuContext& cpu) {
  const TensorView<const T>& a = args.a;
  const TensorView<const T>& b = args.b;
  const std::size_t ra = a.rank();
  const std::size_t rb = b.rank();
  const auto n = static_cast<std::size_t>(a.shape[ra - 2]);
  const auto k = static_cast<std::size_t>(a.shape[ra - 1]);
  const auto m = static_cast<std::size_t>(b.shape[rb - 1]);
  const cpu::GemmEpilogue<T> none;
  for_each_matrix(a, b, [&](std::int64_t offset_a, std::int64_t offset_b, std::int64_t index) {
    cpu::gemm({n, m, k}, a.data + offset_a, static_cast<std::size_t>(a.strides[ra - 2]), false, b.data + offset_b,
              static_cast<std::size_t>(b.strides[rb - 2]), false,
              args.y.data + index * static_cast<std::int64_t>(n * m), m, none, cpu.pool());
  });
}

#if TEENY_TRAINING
template <CpuReal T>
Result<void> refresh_kernel(const linear_op<T>& op, const LinearArgs<T>& args, LinearState& state, CpuContext&) {
  if constexpr (std::is_same_v<T, float>) {
    const auto in = static_cast<std::size_t>(op.attrs.in_features);
    if (!cpu::repack(state.weight, args.weight.data, in, /*trans=*/true) &&
        op.attrs.in_features * op.attrs.out_features != 0) {
      return fail(Errc::internal, "the packed weight was lost before it could be refreshed");
    }
  }
  return ok();  // f64: nothing packed
}

template <CpuReal T>
Result<NoState> prepare_backward_kernel(const linear_op<T>& op, const LinearBackwardArgs<T>& g, CpuContext& cpu) {
  if constexpr (std::is_same_v<T, float>) {  // dgemm needs no workspace
    const auto rows = static_cast<std::size_t>(g.dy.shape[0]);
    const auto in = static_cast<std::size_t>(op.attrs.in_features);
    const auto out = static_cast<std::size_t>(op.attrs.out_features);
    const std::size_t bytes = std::max(cpu::gemm_workspace_bytes({rows, in, out}, false, false),
                                       cpu::gemm_workspace_bytes({out, in, rows}, false, false));
    if (!cpu.reserve_gemm_workspace(bytes)) return fail(Errc::out_of_memory, "cannot allocate the GEMM workspace");
  }
  return NoState{};
}

template <CpuReal T>
void run_backward_kernel(const linear_op<T>& op, const LinearBackwardArgs<T>& g, NoState&, CpuContext& cpu) {
  const LinearArgs<T>& f = g.forward;
  epilogue_backward(f.epilogue, g.dy, f.y, cpu);  // dy now holds dz, the gradient before the activation
  const auto rows = static_cast<std::size_t>(g.dy.shape[0]);
  const auto in = static_cast<std::size_t>(op.attrs.in_features);
  const auto out = static_cast<std::size_t>(op.attrs.out_features);
  cpu::GemmEpilogue<T> accumulate;
  accumulate.accumulate = true;
  // dx[rows, in] += dz[rows, out] W[out, in]
  if (g.dx.data != nullptr) {
    cpu::gemm({rows, in, out}, g.dy.data, out, false, f.weight.data, in, false, g.dx.data, in, accumulate, cpu.pool());
  }
  // dW[out, in] += dz^T x
  if (g.dweight.data != nullptr) {
    cpu::gemm({out, in, rows}, g.dy.data, out, true, f.x.data, in, false, g.dweight.data, in, accumulate, cpu.pool());
  }
  // db[out] += the column sums of dz
  if (g.dbias.data != nullptr) {
    T* __restrict db = g.dbias.data;
    for (std::size_t r = 0; r < rows; ++r) {
      const T* __restrict dz = g.dy.data + r * out;
      for (std::size_t j = 0; j < out; ++j) db[j] += dz[j];
    }
  }
}

template <CpuReal T>
Result<NoState> prepare_backward_kernel(const matmul_op<T>&, const MatMulBackwardArgs<T>&, CpuContext&) {
  return NoState{};
}

template <CpuReal T>
void run_backward_kernel(const matmul_op<T>&, const MatMulBackwardArgs<T>& g, NoState&, CpuContext& cpu) {
  const TensorView<const T>& a = g.forward.a;
  const TensorView<const T>& b = g.forward.b;
  const std::size_t ra = a.rank();
  const std::size_t rb = b.rank();
  const auto n = static_cast<std::size_t>(a.shape[ra - 2]);
  const auto k = static_cast<std::size_t>(a.shape[ra - 1]);
  const auto m = static_cast<std::size_t>(b.shape[rb - 1]);
  const auto lda = static_cast<std::size_t>(a.strides[ra - 2]);
  const auto ldb = static_cast<std::size_t>(b.strides[rb - 2]);
  cpu::GemmEpilogue<T> accumulate;
  accumulate.accumulate = true;
  // One output matrix at a time, in order: a broadcast operand's gradient sums deterministically.
  for_each_matrix(a, b, [&](std::int64_t offset_a, std::int64_t offset_b, std::int64_t index) {
    const T* dy = g.dy.data + index * static_cast<std::int64_t>(n * m);
    if (g.da.data != nullptr) {  // da[n, k] += dy[n, m] b^T
      cpu::gemm({n, k, m}, dy, m, false, b.data + offset_b, ldb, true, g.da.data + offset_a, lda, accumulate,
                cpu.pool());
    }
    if (g.db.data != nullptr) {  // db[k, m] += a^T dy[n, m]
      cpu::gemm({k, m, n}, a.data + offset_a, lda, true, dy, m, false, g.db.data + offset_b, ldb, accumulate,
                cpu.pool());
    }
  });
}
#endif

// Every kernel above compiled here, once per element type: importers call these instances.
#define TEENY_CPU_INSTANCES(T)                                                                         \
  template Result<LinearState> prepare_kernel(const linear_op<T>&, const LinearArgs<T>&, CpuContext&); \
  template void run_kernel(const linear_op<T>&, const LinearArgs<T>&, LinearState&, CpuContext&);      \
  template Result<NoState> prepare_kernel(const matmul_op<T>&, const MatMulArgs<T>&, CpuContext&);     \
  template void run_kernel(const matmul_op<T>&, const MatMulArgs<T>&, NoState&, CpuContext&);          \
  TEENY_CPU_BACKWARD_INSTANCES(T)
#if TEENY_TRAINING
#define TEENY_CPU_BACKWARD_INSTANCES(T)                                                                             \
  template Result<void> refresh_kernel(const linear_op<T>&, const LinearArgs<T>&, LinearState&, CpuContext&);       \
  template Result<NoState> prepare_backward_kernel(const linear_op<T>&, const LinearBackwardArgs<T>&, CpuContext&); \
  template void run_backward_kernel(const linear_op<T>&, const LinearBackwardArgs<T>&, NoState&, CpuContext&);      \
  template Result<NoState> prepare_backward_kernel(const matmul_op<T>&, const MatMulBackwardArgs<T>&, CpuContext&); \
  template void run_backward_kernel(const matmul_op<T>&, const MatMulBackwardArgs<T>&, NoState&, CpuContext&);
#else
#define TEENY_CPU_BACKWARD_INSTANCES(T)
#endif
TEENY_CPU_INSTANCES(float)
TEENY_CPU_INSTANCES(double)
#undef TEENY_CPU_INSTANCES
#undef TEENY_CPU_BACKWARD_INSTANCES

}  // namespace teeny
