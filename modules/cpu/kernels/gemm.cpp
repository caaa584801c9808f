// GEMM front end: instruction-set dispatch, pre-packing, the split over the thread pool, and the
// portable kernels (plain C++ the compiler vectorises for the baseline target).
#include "gemm.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "gemm_detail.hpp"

namespace teeny::cpu {

// ---- Instruction set selection ----------------------------------------------------------------

#if defined(TEENY_CPU_ISA_FIXED)
// Built for one instruction set (-Dcpu_isa): no detection, no dispatch; the CPU must have it.
Isa detected_isa() { return static_cast<Isa>(TEENY_CPU_ISA_FIXED); }
Isa active_isa() { return detected_isa(); }
Isa set_isa(Isa) { return detected_isa(); }
#else
Isa detected_isa() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  static const Isa isa = [] {
    __builtin_cpu_init();
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    return avx512 ? Isa::avx512 : avx2 ? Isa::avx2 : Isa::portable;
  }();
  return isa;
#else
  return Isa::portable;
#endif
}

namespace {

// The best instruction set both the CPU and this build support.
Isa usable_isa() {
  Isa isa = detected_isa();
#if !defined(TEENY_CPU_GEMM_AVX512)
  if (isa == Isa::avx512) isa = Isa::avx2;
#endif
#if !defined(TEENY_CPU_GEMM_AVX2)
  if (isa == Isa::avx2) isa = Isa::portable;
#endif
  return isa;
}

Isa clamp_isa(Isa want) {
  const Isa best = usable_isa();
  return static_cast<std::uint8_t>(want) <= static_cast<std::uint8_t>(best) ? want : best;
}

Isa isa_from_env() {
  const char* s = std::getenv("TEENY_CPU_ISA");
  if (s != nullptr && std::strcmp(s, "portable") == 0) return Isa::portable;
  if (s != nullptr && std::strcmp(s, "avx2") == 0) return clamp_isa(Isa::avx2);
  return usable_isa();
}

std::atomic<Isa>& active_slot() {
  static std::atomic<Isa> slot{isa_from_env()};
  return slot;
}

}  // namespace

Isa active_isa() { return active_slot().load(std::memory_order_relaxed); }

Isa set_isa(Isa isa) {
  const Isa got = clamp_isa(isa);
  active_slot().store(got, std::memory_order_relaxed);
  return got;
}
#endif

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::portable: return "portable";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
  }
  return "unknown";
}

// ---- Portable kernels -------------------------------------------------------------------------

namespace detail {
namespace {

struct VScalar {
  using reg = float;
  static constexpr std::size_t width = 1;
  static reg set1(float x) { return x; }
  static reg zero() { return 0.0f; }
  static reg add(reg a, reg b) { return a + b; }
  static reg sub(reg a, reg b) { return a - b; }
  static reg mul(reg a, reg b) { return a * b; }
  static reg div(reg a, reg b) { return a / b; }
  static reg fmadd(reg a, reg b, reg c) { return a * b + c; }
  static reg fnmadd(reg a, reg b, reg c) { return c - a * b; }
  // Same NaN behaviour as maxps/minps: the second operand wins when either is NaN.
  static reg max(reg a, reg b) { return a > b ? a : b; }
  static reg min(reg a, reg b) { return a < b ? a : b; }
  static reg abs(reg a) { return std::fabs(a); }
  static reg neg(reg a) { return -a; }
  static reg round(reg a) { return std::nearbyint(a); }
  static reg pow2(reg n) { return std::bit_cast<float>(static_cast<std::uint32_t>(static_cast<int>(n) + 127) << 23); }
  static reg select_lt(reg a, reg b, reg if_less, reg otherwise) { return a < b ? if_less : otherwise; }
  static reg copysign(reg mag, reg sign) { return std::copysign(mag, sign); }
  static float hsum(reg v) { return v; }
  static reg loadu(const float* p) { return *p; }
  static void storeu(float* p, reg v) { *p = v; }
  static reg load_partial(const float* p, std::size_t) { return *p; }
  static void store_partial(float* p, std::size_t, reg v) { *p = v; }
};

constexpr std::size_t kPortableMr = blocking_of(Isa::portable).mr;
constexpr std::size_t kPortableNr = blocking_of(Isa::portable).nr;

template <std::size_t M>
void portable_kernel(std::size_t kc, const float* a, const float* b, float* c, std::size_t ldc, std::size_t n,
                     bool load_c, const float* bias_col, const float* bias_row, bool relu) {
  float acc[M][kPortableNr] = {};
  for (std::size_t k = 0; k < kc; ++k, a += kPortableMr, b += kPortableNr) {
    for (std::size_t i = 0; i < M; ++i) {
      for (std::size_t j = 0; j < kPortableNr; ++j) acc[i][j] += a[i] * b[j];
    }
  }
  for (std::size_t i = 0; i < M; ++i) {
    float* ci = c + i * ldc;
    for (std::size_t j = 0; j < n; ++j) {
      float x = acc[i][j];
      if (load_c) x += ci[j];
      if (bias_col != nullptr) x += bias_col[j];
      if (bias_row != nullptr) x += bias_row[i];
      if (relu) x = 0.0f > x ? 0.0f : x;  // NaN stays NaN, as in PyTorch
      ci[j] = x;
    }
  }
}

struct Portable {
  static constexpr std::size_t mr = kPortableMr;
  static constexpr std::size_t nr = kPortableNr;
  static constexpr std::size_t kc = blocking_of(Isa::portable).kc;
  static constexpr std::size_t mc = blocking_of(Isa::portable).mc;
  static constexpr std::size_t nc = blocking_of(Isa::portable).nc;
  using vec = VScalar;
  static constexpr std::size_t thin_regs = 8;  // accumulators the thin (GEMV-like) kernels may use

  static void kernel(std::size_t kc_, const float* a, const float* b, float* c, std::size_t ldc, std::size_t m,
                     std::size_t n, bool load_c, const float* bias_col, const float* bias_row, bool relu) {
    switch (m) {
      case 1: portable_kernel<1>(kc_, a, b, c, ldc, n, load_c, bias_col, bias_row, relu); break;
      case 2: portable_kernel<2>(kc_, a, b, c, ldc, n, load_c, bias_col, bias_row, relu); break;
      case 3: portable_kernel<3>(kc_, a, b, c, ldc, n, load_c, bias_col, bias_row, relu); break;
      default: portable_kernel<4>(kc_, a, b, c, ldc, n, load_c, bias_col, bias_row, relu); break;
    }
  }

  static void activate(float* c, std::size_t ldc, std::size_t m, std::size_t n, Activation act, float slope) {
    activate_tile<VScalar>(c, ldc, m, n, act, slope);
  }

  static void copy_rows(const RowCopy& cp) {
    for (std::size_t p = 0; p < cp.planes; ++p) {
      for (std::size_t r = 0; r < cp.rows; ++r) {
        float* d = cp.dst + p * cp.dst_plane + r * cp.dst_pitch;
        std::fill(d, d + cp.lead, 0.0f);
        std::memcpy(d + cp.lead, cp.src + p * cp.src_plane + r * cp.src_pitch, cp.count * sizeof(float));
        std::fill(d + cp.lead + cp.count, d + cp.width, 0.0f);
      }
    }
  }

  static void max_pool_2x2(const float* x, std::size_t pitch, float* y, std::size_t ho, std::size_t wo) {
    for (std::size_t r = 0; r < ho; ++r)
      max_pool_2x2_columns(x + 2 * r * pitch, x + (2 * r + 1) * pitch, y + r * wo, 0, wo);
  }

  template <std::size_t R>
  static void pack_transposed(const float* s, std::size_t ld, std::size_t w, std::size_t kc_, float* dst) {
    for (std::size_t jj = 0; jj < w; ++jj) {
      const float* row = s + jj * ld;
      for (std::size_t kk = 0; kk < kc_; ++kk) dst[kk * R + jj] = row[kk];
    }
    for (std::size_t jj = w; jj < R; ++jj) {
      for (std::size_t kk = 0; kk < kc_; ++kk) dst[kk * R + jj] = 0.0f;
    }
  }
};

constexpr KernelTable kPortableTable = make_kernel_table<Portable>(Isa::portable);

// Element (k, j) of an operand, raw or packed.
float element(const Operand& op, std::size_t total_k, std::size_t k, std::size_t j) {
  if (op.packed != nullptr) return op.packed->data[packed_index(*op.packed, total_k, k, j)];
  return op.k_contiguous ? op.data[j * op.ld + k] : row_start(op, k)[j];
}

// Unblocked tile needing no scratch memory: the K == 0 case and the fallback when the pool cannot
// allocate a thread's workspace. Activates with the kernels' own code (kt), so that a build for
// one instruction set links no other.
void simple_tile(const KernelTable& kt, const GemmArgs& g, std::size_t m_begin, std::size_t m_end, std::size_t n_begin,
                 std::size_t n_end) {
  const Epilogue& e = g.epi;
  for (std::size_t i = m_begin; i < m_end; ++i) {
    float* ci = g.c + i * g.ldc;
    for (std::size_t j = n_begin; j < n_end; ++j) {
      float acc = e.accumulate ? ci[j] : 0.0f;
      for (std::size_t k = 0; k < g.k; ++k) acc += element(g.a, g.k, k, i) * element(g.b, g.k, k, j);
      if (e.bias != nullptr) acc += e.bias_axis == BiasAxis::column ? e.bias[j] : e.bias[i];
      ci[j] = acc;
    }
    kt.activate(ci + n_begin, g.ldc, 1, n_end - n_begin, e.activation, e.slope);
  }
}

}  // namespace

const KernelTable& portable_kernels() { return kPortableTable; }

}  // namespace detail

// ---- Dispatch and threading -------------------------------------------------------------------

namespace {

using detail::GemmArgs;
using detail::KernelTable;
using detail::min_size;
using detail::Operand;
using detail::PackedLayout;
using detail::round_up;

const KernelTable& kernels_for([[maybe_unused]] Isa isa) {
#if defined(TEENY_CPU_ISA_FIXED) && TEENY_CPU_ISA_FIXED == 2 && defined(TEENY_CPU_GEMM_AVX512)
  return detail::avx512_kernels();  // built for one instruction set: only its kernels are linked
#elif defined(TEENY_CPU_ISA_FIXED) && TEENY_CPU_ISA_FIXED == 1 && defined(TEENY_CPU_GEMM_AVX2)
  return detail::avx2_kernels();
#elif defined(TEENY_CPU_ISA_FIXED)
  return detail::portable_kernels();
#else
  switch (isa) {
#if defined(TEENY_CPU_GEMM_AVX512)
    case Isa::avx512: return detail::avx512_kernels();
#endif
#if defined(TEENY_CPU_GEMM_AVX2)
    case Isa::avx2: return detail::avx2_kernels();
#endif
    default: break;
  }
  return detail::portable_kernels();
#endif
}

// Below this many flops per thread, waking another thread costs more than it saves.
constexpr double kMinFlopsPerThread = 1 << 17;

// How C is cut into tiles: tm x tn tasks over MR-row / NR-column units.
struct Split {
  std::size_t tm = 1;
  std::size_t tn = 1;
};

// Picks the split with the least estimated time for the slowest task: its (padded) multiply-adds
// plus its packing, counting the operand copies that every task repeats.
Split plan_split(const KernelTable& kt, const GemmArgs& g, std::size_t threads) {
  const std::size_t units_m = (g.m + kt.mr - 1) / kt.mr;
  const std::size_t units_n = (g.n + kt.nr - 1) / kt.nr;
  const double flops = 2.0 * static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k);
  const double useful = flops / kMinFlopsPerThread;
  const std::size_t max_tasks = useful >= static_cast<double>(threads) ? threads : static_cast<std::size_t>(useful);
  if (max_tasks < 2) return {};
  const bool pack_a = !detail::uses_packed_directly(g.a, kt.mr, kt.kc);
  const bool pack_b = !detail::uses_packed_directly(g.b, kt.nr, kt.kc);
  Split best;
  double best_cost = 0.0;
  for (std::size_t tm = 1; tm <= min_size(max_tasks, units_m); ++tm) {
    for (std::size_t tn = 1; tm * tn <= max_tasks && tn <= units_n; ++tn) {
      const double rows = static_cast<double>(min_size((units_m + tm - 1) / tm * kt.mr, g.m));
      const double cols = static_cast<double>(min_size((units_n + tn - 1) / tn * kt.nr, g.n));
      const double k = static_cast<double>(g.k);
      // Cycles at ~16 multiply-adds per cycle; a packed element costs about half a cycle.
      double cost = rows * cols * k / 16.0;
      if (pack_a) cost += 0.5 * rows * k;
      if (pack_b) cost += 0.5 * cols * k * std::ceil(rows / static_cast<double>(kt.mc));
      // With the columns split, each task reads its rows of A whole, most of which other threads
      // made: the step before (a layer on the same images) split its output by rows.
      if (pack_a && tn > 1) cost += rows * k * static_cast<double>(tn - 1) / static_cast<double>(tn);
      if (tm * tn == 1 || cost < best_cost * 0.98) {
        best = {tm, tn};
        best_cost = cost;
      }
    }
  }
  return best;
}

void run_gemm(const GemmArgs& g, ThreadPool& pool) {
  if (g.m == 0 || g.n == 0) return;
  const KernelTable& kt = kernels_for(active_isa());
  if (g.k == 0) {
    pool.parallel_for(1, [&](std::size_t) { detail::simple_tile(kt, g, 0, g.m, 0, g.n); });
    return;
  }
  const Split s = plan_split(kt, g, pool.size());
  const std::size_t units_m = (g.m + kt.mr - 1) / kt.mr;
  const std::size_t units_n = (g.n + kt.nr - 1) / kt.nr;
  pool.parallel_for(s.tm * s.tn, [&](std::size_t task, std::size_t worker) {
    const std::size_t i = task / s.tn;
    const std::size_t j = task % s.tn;
    // Balanced cuts on unit boundaries, so that packed operands are addressed panel by panel.
    const std::size_t m0 = min_size(units_m * i / s.tm * kt.mr, g.m);
    const std::size_t m1 = min_size(units_m * (i + 1) / s.tm * kt.mr, g.m);
    const std::size_t n0 = min_size(units_n * j / s.tn * kt.nr, g.n);
    const std::size_t n1 = min_size(units_n * (j + 1) / s.tn * kt.nr, g.n);
    if (m0 >= m1 || n0 >= n1) return;
    const std::size_t floats = detail::tile_workspace_floats(kt, g, m1 - m0, n1 - n0);
    auto* ws = static_cast<float*>(pool.workspace(worker, floats * sizeof(float)));
    if (ws == nullptr) {
      detail::simple_tile(kt, g, m0, m1, n0, n1);
      return;
    }
    kt.tile(g, m0, m1, n0, n1, ws);
  });
}

Operand raw_a(const float* a, std::size_t lda, bool trans_a) {
  // op(A)(m, k): A[m * lda + k], or A[k * lda + m] when transposed; the operand's width is M.
  return Operand{a, lda, !trans_a, nullptr};
}

Operand raw_b(const float* b, std::size_t ldb, bool trans_b) {
  // op(B)(k, n): B[k * ldb + n], or B[n * ldb + k] when transposed.
  return Operand{b, ldb, trans_b, nullptr};
}

PackedLayout layout_of(const PackedMatrix& p) {
  return PackedLayout{p.data(), p.block_k(), p.panel(), p.padded_width()};
}

}  // namespace

// ---- PackedMatrix -----------------------------------------------------------------------------

PackedMatrix::~PackedMatrix() { reset(); }

PackedMatrix::PackedMatrix(PackedMatrix&& other) noexcept
    : memory_(other.memory_),
      data_(std::exchange(other.data_, nullptr)),
      floats_(std::exchange(other.floats_, 0)),
      rows_(other.rows_),
      cols_(other.cols_),
      block_k_(other.block_k_),
      panel_(other.panel_),
      padded_(other.padded_),
      operand_(other.operand_),
      isa_(other.isa_) {}

PackedMatrix& PackedMatrix::operator=(PackedMatrix&& other) noexcept {
  if (this != &other) {
    reset();
    memory_ = other.memory_;
    data_ = std::exchange(other.data_, nullptr);
    floats_ = std::exchange(other.floats_, 0);
    rows_ = other.rows_;
    cols_ = other.cols_;
    block_k_ = other.block_k_;
    panel_ = other.panel_;
    padded_ = other.padded_;
    operand_ = other.operand_;
    isa_ = other.isa_;
  }
  return *this;
}

void PackedMatrix::reset() {
  if (data_ != nullptr) memory_->release(data_);
  data_ = nullptr;
  floats_ = 0;
}

namespace {

// Allocates (from `memory`) and fills a packed operand of depth k and width w; empty on allocation
// failure.
template <class Fill>
bool allocate_packed(Memory& memory, float*& data, std::size_t& floats, std::size_t k, std::size_t padded, Fill fill) {
  const std::size_t want = k * padded;
  // Overflow of k * padded, or of the byte count, fails like an allocation would.
  if (padded != 0 && (want / padded != k || want > static_cast<std::size_t>(-1) / sizeof(float) - 16)) return false;
  // Even an empty operand gets a block, so that ok() tells success from failure.
  const std::size_t bytes = (want == 0 ? 16 : want) * sizeof(float);
  data = static_cast<float*>(memory.allocate(bytes));
  if (data == nullptr) return false;
  floats = want;
  fill(data);
  return true;
}

}  // namespace

PackedMatrix PackedMatrix::pack(Operand operand, std::size_t k, std::size_t width, const float* x, std::size_t ld,
                                bool trans, Memory& memory) {
  PackedMatrix p;
  p.memory_ = &memory;
  const Isa isa = active_isa();
  const KernelTable& kt = kernels_for(isa);
  const bool a = operand == Operand::a;
  const std::size_t panel = a ? kt.mr : kt.nr;
  const std::size_t padded = round_up(width, panel);
  const detail::Operand src = a ? raw_a(x, ld, trans) : raw_b(x, ld, trans);
  const detail::PackFn fill = a ? kt.pack_a : kt.pack_b;
  if (!allocate_packed(memory, p.data_, p.floats_, k, padded, [&](float* dst) {
        if (width != 0 && k != 0) fill(src, k, width, dst);
      })) {
    return p;
  }
  p.rows_ = a ? width : k;
  p.cols_ = a ? k : width;
  p.block_k_ = kt.kc;
  p.panel_ = panel;
  p.padded_ = padded;
  p.operand_ = operand;
  p.isa_ = isa;
  return p;
}

PackedMatrix pack_a(std::size_t m, std::size_t k, const float* a, std::size_t lda, bool trans_a, Memory& memory) {
  return PackedMatrix::pack(PackedMatrix::Operand::a, k, m, a, lda, trans_a, memory);
}

PackedMatrix pack_b(std::size_t k, std::size_t n, const float* b, std::size_t ldb, bool trans_b, Memory& memory) {
  return PackedMatrix::pack(PackedMatrix::Operand::b, k, n, b, ldb, trans_b, memory);
}

bool repack(PackedMatrix& packed, const float* x, std::size_t ld, bool trans) {
  if (!packed.ok()) return false;
  const KernelTable& kt = kernels_for(packed.isa_);
  if (packed.rows_ == 0 || packed.cols_ == 0) return true;
  if (packed.operand_ == PackedMatrix::Operand::a) {
    kt.pack_a(raw_a(x, ld, trans), packed.cols_, packed.rows_, packed.data_);
  } else {
    kt.pack_b(raw_b(x, ld, trans), packed.rows_, packed.cols_, packed.data_);
  }
  return true;
}

// ---- GEMM entry points ------------------------------------------------------------------------

void sgemm(const GemmShape& shape, const float* a, std::size_t lda, bool trans_a, const float* b, std::size_t ldb,
           bool trans_b, float* c, std::size_t ldc, const Epilogue& epilogue, ThreadPool& pool) {
  GemmArgs g{shape.m, shape.n, shape.k, raw_a(a, lda, trans_a), raw_b(b, ldb, trans_b), c, ldc, epilogue};
  run_gemm(g, pool);
}

bool sgemm(const GemmShape& shape, const PackedMatrix& a, const float* b, std::size_t ldb, bool trans_b, float* c,
           std::size_t ldc, const Epilogue& epilogue, ThreadPool& pool) {
  if (!a.ok() || a.operand() != PackedMatrix::Operand::a || a.rows() != shape.m || a.cols() != shape.k) {
    return false;
  }
  const PackedLayout la = layout_of(a);
  GemmArgs g{shape.m, shape.n, shape.k, Operand{nullptr, 0, false, &la}, raw_b(b, ldb, trans_b), c, ldc, epilogue};
  run_gemm(g, pool);
  return true;
}

bool sgemm(const GemmShape& shape, const float* a, std::size_t lda, bool trans_a, const PackedMatrix& b, float* c,
           std::size_t ldc, const Epilogue& epilogue, ThreadPool& pool, ColumnOrder order) {
  if (!b.ok() || b.operand() != PackedMatrix::Operand::b || b.rows() != shape.k || b.cols() != shape.n) {
    return false;
  }
  const PackedLayout lb = layout_of(b);
  GemmArgs g{shape.m, shape.n,  shape.k, raw_a(a, lda, trans_a), Operand{nullptr, 0, false, &lb}, c,
             ldc,     epilogue, order};
  run_gemm(g, pool);
  return true;
}

bool sgemm(const GemmShape& shape, const PackedMatrix& a, const RowTable& b, float* c, std::size_t ldc,
           const Epilogue& epilogue, ThreadPool& pool) {
  if (!a.ok() || a.operand() != PackedMatrix::Operand::a || a.rows() != shape.m || a.cols() != shape.k) {
    return false;
  }
  const PackedLayout la = layout_of(a);
  GemmArgs g{shape.m, shape.n, shape.k, Operand{nullptr, 0, false, &la}, Operand{b.base, 0, false, nullptr, b.offsets},
             c,       ldc,     epilogue};
  run_gemm(g, pool);
  return true;
}

void max_pool_2x2(const float* x, std::size_t pitch, float* y, std::size_t ho, std::size_t wo) {
  kernels_for(active_isa()).max_pool_2x2(x, pitch, y, ho, wo);
}

bool max_pool_3x3_stride2(const float* r0, const float* r1, const float* r2, float* out, std::size_t begin,
                          std::size_t end, std::ptrdiff_t offset) {
  const detail::MaxPool3x3Fn fn = kernels_for(active_isa()).max_pool_3x3_stride2;
  if (fn == nullptr) return false;
  fn(r0, r1, r2, out, begin, end, offset);
  return true;
}

void copy_rows(const RowCopy& copy) { kernels_for(active_isa()).copy_rows(copy); }

namespace {

// cpu::pixel_rows where the instruction set has no kernel for it (a model planned with one and
// run after set_isa chose another): each output's sum in order of k.
void pixel_rows_loops(const PixelRows& p) {
  const std::size_t pitch = pixel_rows_pitch(p.channels);
  for (std::size_t o = 0; o < p.channels; ++o) {
    for (std::size_t r = 0; r < p.rows; ++r) {
      const float* x = p.x + r * p.x_pitch;
      float* out = p.out + o * p.ldo + r * p.out_pitch;
      for (std::size_t i = 0; i < p.width; ++i) {
        float sum = p.bias != nullptr ? p.bias[o] : 0.0f;
        for (std::size_t k = 0; k < p.depth; ++k) {
          sum += p.weights[k * pitch + o] * x[p.offsets[k] + static_cast<std::ptrdiff_t>(i)];
        }
        out[i] = p.relu && sum < 0.0f ? 0.0f : sum;  // a NaN is kept, as in PyTorch
      }
    }
  }
}

}  // namespace

void pixel_rows(const PixelRows& p) {
  const detail::PixelRowsFn fn = kernels_for(active_isa()).pixel_rows;
  (fn != nullptr ? fn : pixel_rows_loops)(p);
}

bool has_pixel_rows() { return kernels_for(active_isa()).pixel_rows != nullptr; }

GemmTile gemm_tile() {
  const KernelTable& kt = kernels_for(active_isa());
  return {kt.mr, kt.nr, kt.rows_in_place};
}

namespace {
std::size_t workspace_bytes(const KernelTable& kt, const GemmShape& shape, bool a_packed, bool b_packed);
}  // namespace

std::size_t gemm_workspace_bytes(const GemmShape& shape, bool a_packed, bool b_packed) {
  return workspace_bytes(kernels_for(active_isa()), shape, a_packed, b_packed);
}

namespace {
std::size_t workspace_bytes(const KernelTable& kt, const GemmShape& shape, bool a_packed, bool b_packed) {
  if (shape.m == 0 || shape.n == 0 || shape.k == 0) return 0;
  // A packed operand in the active layout needs no block; describe it as such.
  const PackedLayout la{nullptr, kt.kc, kt.mr, 0};
  const PackedLayout lb{nullptr, kt.kc, kt.nr, 0};
  GemmArgs g{shape.m,
             shape.n,
             shape.k,
             Operand{nullptr, 0, false, a_packed ? &la : nullptr},
             Operand{nullptr, 0, false, b_packed ? &lb : nullptr},
             nullptr,
             0,
             Epilogue{}};
  return detail::tile_workspace_floats(kt, g, shape.m, shape.n) * sizeof(float);
}
}  // namespace

}  // namespace teeny::cpu
