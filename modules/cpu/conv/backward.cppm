// teeny.cpu:conv_backward — the convolution's backward (training builds): image by image
// (images split over the threads) and group by group on the im2col matrix: dW_g += dz_g cols^T,
// dcols = W_g^T dz_g scattered back into dx (col2im), db += the row sums of dz.
module;
#include "cpu/kernels/gemm.hpp"
#include "math/pool.hpp"  // Window2d
export module teeny.cpu:conv_backward;
import teeny.std;
import teeny.core;
import teeny.model;
import teeny.ops;
import :context;
import :elementwise;
import :conv_common;

#if TEENY_TRAINING
export namespace teeny {
template <CpuReal T>
Result<NoState> prepare_backward_kernel(const conv_op<T>& op, const ConvBackwardArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_backward_kernel(const conv_op<T>& op, const ConvBackwardArgs<T>& args, NoState& state, CpuContext& cpu);
}  // namespace teeny

namespace teeny {
namespace conv {
// The im2col matrix of one image's group: cols[(c * kh + i) * kw + j][oh * Wo + ow] is the input at
// (c, oh * sh - ph + i * dh, ow * sw - pw + j * dw), zero outside it.
template <class T>
void im2col_group(const T* x, const Geometry& g, const Window2d& win, T* cols) {
  for (std::int64_t c = 0; c < g.cg; ++c) {
    for (std::int64_t i = 0; i < win.kernel_h; ++i) {
      const std::int64_t ih0 = i * win.dilation_h - win.pad_h;
      const auto [oh_lo, oh_hi] = inside(ih0, win.stride_h, g.h, g.ho);
      for (std::int64_t j = 0; j < win.kernel_w; ++j) {
        const std::int64_t iw0 = j * win.dilation_w - win.pad_w;
        const auto [ow_lo, ow_hi] = inside(iw0, win.stride_w, g.w, g.wo);
        T* row = cols + ((c * win.kernel_h + i) * win.kernel_w + j) * g.p;
        zero(row, oh_lo * g.wo);
        for (std::int64_t oh = oh_lo; oh < oh_hi; ++oh) {
          const T* src = x + (c * g.h + ih0 + oh * win.stride_h) * g.w + iw0;
          T* dst = row + oh * g.wo;
          zero(dst, ow_lo);
          if (win.stride_w == 1) {  // the common case: a contiguous run
            std::memcpy(dst + ow_lo, src + ow_lo, static_cast<std::size_t>(ow_hi - ow_lo) * sizeof(T));
          } else {
            for (std::int64_t ow = ow_lo; ow < ow_hi; ++ow) dst[ow] = src[ow * win.stride_w];
          }
          zero(dst + ow_hi, g.wo - ow_hi);
        }
        zero(row + oh_hi * g.wo, (g.ho - oh_hi) * g.wo);
      }
    }
  }
}

// The transpose of im2col_group: dx += each column entry at the input position it was read from.
template <class T>
void col2im_group(const T* cols, const Geometry& g, const Window2d& win, T* dx) {
  for (std::int64_t c = 0; c < g.cg; ++c) {
    for (std::int64_t i = 0; i < win.kernel_h; ++i) {
      const std::int64_t ih0 = i * win.dilation_h - win.pad_h;
      const auto [oh_lo, oh_hi] = inside(ih0, win.stride_h, g.h, g.ho);
      for (std::int64_t j = 0; j < win.kernel_w; ++j) {
        const std::int64_t iw0 = j * win.dilation_w - win.pad_w;
        const auto [ow_lo, ow_hi] = inside(iw0, win.stride_w, g.w, g.wo);
        const T* row = cols + ((c * win.kernel_h + i) * win.kernel_w + j) * g.p;
        for (std::int64_t oh = oh_lo; oh < oh_hi; ++oh) {
          T* __restrict dst = dx + (c * g.h + ih0 + oh * win.stride_h) * g.w + iw0;
          const T* __restrict src = row + oh * g.wo;
          if (win.stride_w == 1) {
            for (std::int64_t ow = ow_lo; ow < ow_hi; ++ow) dst[ow] += src[ow];
          } else {
            for (std::int64_t ow = ow_lo; ow < ow_hi; ++ow) dst[ow * win.stride_w] += src[ow];
          }
        }
      }
    }
  }
}

// Per-worker elements of the backward's scratch: one image group's im2col matrix and its
// gradient, then the worker's own dW and db sums (added together after the images).
std::int64_t backward_scratch_elements(const Geometry& g) { return 2 * g.k * g.p + g.o * g.k + g.o; }

// dst[o] += the sum of row o of src[rows x length], accumulated in double in eight independent
// lanes (so that it vectorises).
template <class T>
void add_row_sums(const T* src, std::int64_t rows, std::int64_t length, T* dst) {
  for (std::int64_t o = 0; o < rows; ++o) {
    const T* row = src + o * length;
    double lanes[8] = {};
    std::int64_t i = 0;
    for (; i + 8 <= length; i += 8) {
      for (int l = 0; l < 8; ++l) lanes[l] += row[i + l];
    }
    for (; i < length; ++i) lanes[0] += row[i];
    double sum = 0;
    for (double lane : lanes) sum += lane;
    dst[o] += static_cast<T>(sum);
  }
}
}  // namespace conv

using namespace conv;  // this file's helpers and the shared ones (not exported)

template <CpuReal T>
Result<NoState> prepare_backward_kernel(const conv_op<T>&, const ConvBackwardArgs<T>& args, CpuContext& cpu) {
  const Geometry g = geometry(args.forward);
  const std::int64_t elements = backward_scratch_elements(g);
  if (!cpu.reserve_scratch(static_cast<std::size_t>(elements) * sizeof(T))) {
    return fail(Errc::out_of_memory, "cannot allocate ", elements,
                " elements of convolution backward scratch per thread");
  }
  // The workspace of its GEMMs (dW and dcols, operands unpacked), for every worker now: a worker
  // that first ran one of them in a later step would allocate it then.
  if constexpr (std::is_same_v<T, float>) {  // dgemm needs no workspace
    const auto og = static_cast<std::size_t>(g.og);
    const auto k = static_cast<std::size_t>(g.k);
    const auto p = static_cast<std::size_t>(g.p);
    const std::size_t bytes = std::max(cpu::gemm_workspace_bytes({og, k, p}, false, false),
                                       cpu::gemm_workspace_bytes({k, p, og}, false, false));
    if (!cpu.reserve_gemm_workspace(bytes)) {
      return fail(Errc::out_of_memory, "cannot allocate the GEMM workspace of a convolution's backward");
    }
  }
  return NoState{};
}

template <CpuReal T>
void run_backward_kernel(const conv_op<T>&, const ConvBackwardArgs<T>& args, NoState&, CpuContext& cpu) {
  const ConvArgs<T>& f = args.forward;
  epilogue_backward(f.epilogue, args.dy, f.y, cpu);  // dy now holds dz, before the activation
  const Geometry g = geometry(f);
  const Window2d& win = f.window;
  const auto og = static_cast<std::size_t>(g.og);
  const auto k = static_cast<std::size_t>(g.k);
  const auto p = static_cast<std::size_t>(g.p);
  cpu::GemmEpilogue<T> accumulate;
  accumulate.accumulate = true;
  const cpu::GemmEpilogue<T> overwrite;
  // Images are split over the workers, each running its GEMMs alone (a GEMM called inside a task
  // runs on that task's thread): an image's GEMMs are too small to split well, and its dx is its
  // own. dW and db are summed per task (at most one task per thread, each summing in the scratch
  // block of its own index while it works in its thread's) and added up in task order afterwards,
  // so that the result does not depend on which thread ran which task.
  const std::int64_t tasks = std::min<std::int64_t>(g.n, static_cast<std::int64_t>(cpu.threads()));
  auto partial_dw = [&](std::size_t task) { return cpu.scratch_as<T>(task) + 2 * g.k * g.p; };
  auto partial_db = [&](std::size_t task) { return partial_dw(task) + g.o * g.k; };
  cpu.pool().parallel_for(static_cast<std::size_t>(tasks), [&](std::size_t task, std::size_t worker) {
    T* cols = cpu.scratch_as<T>(worker);
    T* dcols = cols + g.k * g.p;
    T* dw = partial_dw(task);
    T* db = partial_db(task);
    std::fill(dw, dw + g.o * g.k + g.o, T(0));
    const auto t = static_cast<std::int64_t>(task);
    for (std::int64_t n = g.n * t / tasks; n < g.n * (t + 1) / tasks; ++n) {
      const T* dz = args.dy.data + n * g.o * g.p;
      for (std::int64_t group = 0; group < g.groups; ++group) {
        const T* dz_g = dz + group * g.og * g.p;
        const T* x_g = f.x.data + (n * g.c + group * g.cg) * g.h * g.w;
        if (args.dweight.data != nullptr) {  // dW_g[og, K] += dz_g[og, P] cols^T[P, K]
          im2col_group(x_g, g, win, cols);
          cpu::gemm({og, k, p}, dz_g, p, false, cols, p, true, dw + group * g.og * g.k, k, accumulate, cpu.pool());
        }
        if (args.dx.data != nullptr) {  // dcols[K, P] = W_g^T[K, og] dz_g[og, P], then col2im
          cpu::gemm({k, p, og}, f.weight.data + group * g.og * g.k, k, true, dz_g, p, false, dcols, p, overwrite,
                    cpu.pool());
          col2im_group(dcols, g, win, args.dx.data + (n * g.c + group * g.cg) * g.h * g.w);
        }
      }
      if (args.dbias.data != nullptr) add_row_sums(dz, g.o, g.p, db);
    }
  });
  for (std::size_t w = 0; w < static_cast<std::size_t>(tasks); ++w) {
    if (args.dweight.data != nullptr) {
      const T* dw = partial_dw(w);
      for (std::int64_t i = 0; i < g.o * g.k; ++i) args.dweight.data[i] += dw[i];
    }
    if (args.dbias.data != nullptr) {
      const T* db = partial_db(w);
      for (std::int64_t o = 0; o < g.o; ++o) args.dbias.data[o] += db[o];
    }
  }
}

#define TEENY_CPU_INSTANCES(T)                                                                                  \
  template Result<NoState> prepare_backward_kernel(const conv_op<T>&, const ConvBackwardArgs<T>&, CpuContext&); \
  template void run_backward_kernel(const conv_op<T>&, const ConvBackwardArgs<T>&, NoState&, CpuContext&);
TEENY_CPU_INSTANCES(float)
TEENY_CPU_INSTANCES(double)
#undef TEENY_CPU_INSTANCES

}  // namespace teeny
#endif
