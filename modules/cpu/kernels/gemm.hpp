// GEMM for the CPU backend: C = op(A) * op(B) (+ C) (+ bias), then an activation. Single precision
// (sgemm) is the fast path; double precision (dgemm) is a plain blocked one, for exact checks.
//
// Row-major throughout: C is M x N with row stride ldc, op(A) is M x K and op(B) is K x N. A
// transposed operand is stored the other way round (trans_b = true: B is an N x K matrix, which is
// exactly a PyTorch Linear weight, y = x * W^T). Kernels are chosen at run time from the CPU's
// instruction set (AVX-512, AVX2+FMA or portable C++), blocked for the caches and parallelised
// over M and N with a ThreadPool. A constant operand (a layer's weight) can be packed once into
// the kernels' layout with pack_a / pack_b.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "memory.hpp"
#include "thread_pool.hpp"

namespace teeny::cpu {

// ---- Instruction set selection ----------------------------------------------------------------

enum class Isa : std::uint8_t { portable, avx2, avx512 };

// The best instruction set this CPU (and OS) supports. avx2 means AVX2 + FMA; avx512 means
// AVX-512 F/BW/DQ/VL. A build for one instruction set (-Dcpu_isa, which defines
// TEENY_CPU_ISA_FIXED) detects nothing: this, active_isa and set_isa all give that one.
Isa detected_isa();

// The instruction set the kernels use: detected_isa(), lowered by the TEENY_CPU_ISA environment
// variable (portable | avx2 | avx512, read once) or by set_isa.
Isa active_isa();

// Selects the kernels' instruction set, clamped to the best one that both the CPU and this build
// support (an unknown TEENY_CPU_ISA value selects that one too); returns the one now active.
// Not synchronised with running GEMMs: call it between them.
Isa set_isa(Isa isa);

const char* isa_name(Isa isa);

// ---- Epilogue ---------------------------------------------------------------------------------

enum class Activation : std::uint8_t { none, relu, leaky_relu, gelu_erf, gelu_tanh, silu, sigmoid, tanh };

enum class BiasAxis : std::uint8_t {
  column,  // bias[n] is added to C[m][n] (Linear: one bias per output feature)
  row,     // bias[m] is added to C[m][n] (convolution as W[O, C*kh*kw] x columns)
};

// Applied to every element of C in this order: C = (accumulate ? C : 0) + op(A)*op(B);
// C += bias; C = activation(C). T is the GEMM's element type.
template <class T>
struct GemmEpilogue {
  const T* bias = nullptr;
  BiasAxis bias_axis = BiasAxis::column;
  Activation activation = Activation::none;
  T slope = T(0.01);  // negative slope of leaky_relu
  bool accumulate = false;
};
using Epilogue = GemmEpilogue<float>;

// The order a GEMM computes C's column panels in, where it may choose (one row of A against a
// pre-packed B; elsewhere it is ignored). The result is the same either way, bit for bit: each
// element's sum runs over K in the same order. A batch-1 layer, whose packed weight streams from
// memory on every call, alternates it: each call then reads first the part of the weight the
// call before read last, which is still in the L2 cache.
enum class ColumnOrder : std::uint8_t { ascending, descending };

struct GemmShape {
  std::size_t m = 0;
  std::size_t n = 0;
  std::size_t k = 0;
};

// ---- Pre-packed operands ----------------------------------------------------------------------

// A constant GEMM operand in the kernels' packed layout (64-byte aligned, owned, move-only; its
// storage comes from a Memory and goes back there). It records the instruction set it was packed for; a GEMM running
// with another instruction set repacks it block by block into its scratch memory, which is correct but slower.
class PackedMatrix {
 public:
  enum class Operand : std::uint8_t { a, b };

  PackedMatrix() = default;
  ~PackedMatrix();
  PackedMatrix(PackedMatrix&& other) noexcept;
  PackedMatrix& operator=(PackedMatrix&& other) noexcept;
  PackedMatrix(const PackedMatrix&) = delete;
  PackedMatrix& operator=(const PackedMatrix&) = delete;

  // False when default-constructed or when packing could not allocate its storage.
  bool ok() const { return data_ != nullptr; }
  Operand operand() const { return operand_; }
  // Logical size of op(X): M x K for an A operand, K x N for a B operand.
  std::size_t rows() const { return rows_; }
  std::size_t cols() const { return cols_; }
  Isa isa() const { return isa_; }
  std::size_t size_bytes() const { return floats_ * sizeof(float); }

  // Layout, for the kernels: K is cut into blocks of block_k; each block stores the wide
  // dimension (M for A, N for B) in panels of `panel` elements, padded to padded_width.
  const float* data() const { return data_; }
  std::size_t block_k() const { return block_k_; }
  std::size_t panel() const { return panel_; }
  std::size_t padded_width() const { return padded_; }

 private:
  friend PackedMatrix pack_a(std::size_t, std::size_t, const float*, std::size_t, bool, Memory&);
  friend PackedMatrix pack_b(std::size_t, std::size_t, const float*, std::size_t, bool, Memory&);
  friend bool repack(PackedMatrix&, const float*, std::size_t, bool);
  // pack_a's and pack_b's work: op(X) packed along its depth k and its width (M for A, N for B).
  static PackedMatrix pack(Operand operand, std::size_t k, std::size_t width, const float* x, std::size_t ld,
                           bool trans, Memory& memory);
  void reset();

  Memory* memory_ = nullptr;
  float* data_ = nullptr;
  std::size_t floats_ = 0;
  std::size_t rows_ = 0;
  std::size_t cols_ = 0;
  std::size_t block_k_ = 0;
  std::size_t panel_ = 0;
  std::size_t padded_ = 0;
  Operand operand_ = Operand::a;
  Isa isa_ = Isa::portable;
};

// Packs op(A) (M x K) for the active instruction set. trans_a: A is stored K x M. A convolution
// weight W[O, C*kh*kw] is an A operand. Returns a PackedMatrix with ok() == false when the storage
// cannot be allocated from `memory`.
PackedMatrix pack_a(std::size_t m, std::size_t k, const float* a, std::size_t lda, bool trans_a,
                    Memory& memory = heap_memory());

// Packs op(B) (K x N). trans_b: B is stored N x K (a Linear weight W[N, K]).
PackedMatrix pack_b(std::size_t k, std::size_t n, const float* b, std::size_t ldb, bool trans_b,
                    Memory& memory = heap_memory());

// Refills `packed` in place from new values of the same op(X) (a weight after an optimizer step):
// the same shape, layout and instruction set, no allocation. `x`, `ld` and `trans` are read as by
// the pack_a / pack_b call that made it. False (nothing written) when `packed` is not ok().
bool repack(PackedMatrix& packed, const float* x, std::size_t ld, bool trans);

// ---- GEMM -------------------------------------------------------------------------------------

// C[M x N] = op(A)[M x K] * op(B)[K x N] with the epilogue applied, row-major, leading dimensions
// in elements (lda >= K or M, ldb >= N or K, ldc >= N). Any size is allowed, including 0; K == 0
// leaves the epilogue alone (C = accumulate ? C : 0, + bias, activation). The pool's threads and
// per-thread scratch memory are used; nothing is allocated once the scratch has grown to size.
// C must not overlap A or B.
void sgemm(const GemmShape& shape, const float* a, std::size_t lda, bool trans_a, const float* b, std::size_t ldb,
           bool trans_b, float* c, std::size_t ldc, const Epilogue& epilogue, ThreadPool& pool);

// Same, with op(A) pre-packed (a.rows() == M, a.cols() == K). A packed operand that is not ok()
// or does not match the shape leaves C untouched and returns false.
bool sgemm(const GemmShape& shape, const PackedMatrix& a, const float* b, std::size_t ldb, bool trans_b, float* c,
           std::size_t ldc, const Epilogue& epilogue, ThreadPool& pool);

// Same, with op(B) pre-packed (b.rows() == K, b.cols() == N): the Linear layer's path.
bool sgemm(const GemmShape& shape, const float* a, std::size_t lda, bool trans_a, const PackedMatrix& b, float* c,
           std::size_t ldc, const Epilogue& epilogue, ThreadPool& pool, ColumnOrder order = ColumnOrder::ascending);

// A K x N operand given row by row: row k is the N floats at base + offsets[k]. Convolutions pass
// their input this way (implicit GEMM): every row of the im2col matrix is a shifted window of a
// zero-padded input plane, so the matrix itself is never written out.
struct RowTable {
  const float* base = nullptr;
  const std::ptrdiff_t* offsets = nullptr;  // K entries, in elements
};

// Same, with op(A) pre-packed and B given row by row.
bool sgemm(const GemmShape& shape, const PackedMatrix& a, const RowTable& b, float* c, std::size_t ldc,
           const Epilogue& epilogue, ThreadPool& pool);

// The register tile of the active kernels: C is computed in mr x nr blocks (narrower edge blocks
// cost about as much as full ones), for callers choosing between GEMM shapes.
struct GemmTile {
  std::size_t mr = 0;
  std::size_t nr = 0;
  bool rows_in_place = false;  // a RowTable B is read in place, not packed (AVX-512)
};
GemmTile gemm_tile();

// An implicit convolution's product with output pixels as the register tile's rows and up to 16
// output channels as its columns, for layers with few output channels, which would fill few rows
// of the GEMM's tile (LeNet's conv2: 16 channels, 12 + 4 rows of two tiles, each as costly as a
// full one). For output rows r < rows and their pixels i < width, and channels o < channels:
//   out[o * ldo + r * out_pitch + i] = act(bias[o] + sum over k < depth of
//                                          weights[k * weights_pitch + o] * x[r * x_pitch + offsets[k] + i])
// with act ReLU (max(0, v), NaN kept) or none; `weights` holds each k's channels in a row padded
// with zeros to weights_pitch = round_up(channels, 16) floats, and bias may be null.
struct PixelRows {
  const float* x = nullptr;                 // the windows of output row 0, at offsets[k] from here
  std::size_t x_pitch = 0;                  // floats from one output row's windows to the next's
  const std::ptrdiff_t* offsets = nullptr;  // depth of them
  std::size_t depth = 0;
  std::size_t rows = 0;
  std::size_t width = 0;
  const float* weights = nullptr;
  std::size_t channels = 0;
  const float* bias = nullptr;
  bool relu = false;
  float* out = nullptr;
  std::size_t out_pitch = 0;
  std::size_t ldo = 0;
};
constexpr std::size_t pixel_rows_pitch(std::size_t channels) { return (channels + 15) / 16 * 16; }
// Runs `p` with the active instruction set's kernel (AVX-512 has one), or with plain loops where
// it has none: has_pixel_rows() says which, and the convolution planner picks pixel rows only
// where there is a kernel.
void pixel_rows(const PixelRows& p);
bool has_pixel_rows();

// y[r][c] = the max of x's 2x2 block at rows 2r, 2r + 1 and columns 2c, 2c + 1 (NaN wins, as in
// PyTorch), for r < ho, c < wo, x's rows `pitch` floats apart: a 2x2 max pool at stride 2 in the
// active instruction set's vectors, for a convolution's folded max pool, which reads the GEMM's
// result in place.
void max_pool_2x2(const float* x, std::size_t pitch, float* y, std::size_t ho, std::size_t wo);

// out[o] = the max of the 3x3 window over rows r0, r1 and r2 at columns 2o + offset .. 2o + offset +
// 2 (NaN wins, as in PyTorch), for o in [begin, end), every column read inside the rows: a 3x3 max
// pool at stride 2 (ResNet's stem pool), a row of it. False, having done nothing, where the active
// instruction set has no such kernel (AVX-512 has; the others leave it to the pool's own loops).
bool max_pool_3x3_stride2(const float* r0, const float* r1, const float* r2, float* out, std::size_t begin,
                          std::size_t end, std::ptrdiff_t offset);

// Short rows with zero margins: the rows of a convolution's planes (LeNet's are 10 to 28 floats),
// `rows` in each of `planes` planes. Row r of plane p is the `width` floats at
// dst + p * dst_plane + r * dst_pitch: its columns [lead, lead + count) are copied from
// src + p * src_plane + r * src_pitch on (src points at the first float copied), the others are 0
// (lead + count <= width).
struct RowCopy {
  const float* src = nullptr;
  std::size_t src_pitch = 0, src_plane = 0;
  float* dst = nullptr;
  std::size_t dst_pitch = 0, dst_plane = 0;
  std::size_t planes = 1, rows = 0, width = 0, lead = 0, count = 0;
};

// Runs a RowCopy with whole vectors, masked at the edges, where a call to memcpy and memset per
// row would cost more than the copy.
void copy_rows(const RowCopy& copy);

// ---- Double precision ----------------------------------------------------------------------

// C[M x N] = op(A) * op(B) in double, with sgemm's operand conventions and epilogue (any size,
// K == 0 included; C must not overlap A or B). Cache-blocked portable C++ spread over the pool's
// threads by rows of C, no packing and no workspace: f64 is there for exact checks, not speed.
void dgemm(const GemmShape& shape, const double* a, std::size_t lda, bool trans_a, const double* b, std::size_t ldb,
           bool trans_b, double* c, std::size_t ldc, const GemmEpilogue<double>& epilogue, ThreadPool& pool);

// One name for both precisions, for kernels written once over their element type.
inline void gemm(const GemmShape& shape, const float* a, std::size_t lda, bool trans_a, const float* b, std::size_t ldb,
                 bool trans_b, float* c, std::size_t ldc, const Epilogue& epilogue, ThreadPool& pool) {
  sgemm(shape, a, lda, trans_a, b, ldb, trans_b, c, ldc, epilogue, pool);
}
inline void gemm(const GemmShape& shape, const double* a, std::size_t lda, bool trans_a, const double* b,
                 std::size_t ldb, bool trans_b, double* c, std::size_t ldc, const GemmEpilogue<double>& epilogue,
                 ThreadPool& pool) {
  dgemm(shape, a, lda, trans_a, b, ldb, trans_b, c, ldc, epilogue, pool);
}

// Bytes of per-thread scratch memory a GEMM of this shape asks the pool for (0 when none), for
// callers that want to budget memory. The pool allocates it on first use and keeps it.
std::size_t gemm_workspace_bytes(const GemmShape& shape, bool a_packed, bool b_packed);

// ---- Planning memory at compile time ----------------------------------------------------------

// Each instruction set's register tile (mr x nr) and cache blocking: packed blocks kc deep, mc rows
// of A and nc columns of B at a time. The kernels (gemm*.cpp) are built from these.
struct GemmBlocking {
  std::size_t mr, nr, kc, mc, nc;
};
inline constexpr GemmBlocking kGemmBlocking[] = {
    {4, 8, 256, 512, 512},     // Isa::portable
    {6, 16, 384, 1536, 480},   // Isa::avx2
    {12, 32, 384, 2304, 480},  // Isa::avx512
};
constexpr const GemmBlocking& blocking_of(Isa isa) { return kGemmBlocking[static_cast<std::size_t>(isa)]; }
// A block of A starts on a panel: a pre-packed A is read in place from row m0 of each block.
static_assert(
    [] {
      for (const GemmBlocking& b : kGemmBlocking) {
        if (b.mc % b.mr != 0 || b.nc % b.nr != 0) return false;
      }
      return true;
    }(),
    "mc and nc must be whole numbers of register tiles (mr, nr)");

// Floats of one tile's workspace on the blocked path: an A block and a B block, each unless that
// operand is read packed in place. (gemm_detail.hpp's tile_workspace_floats; the thin path's below.)
constexpr std::size_t blocked_workspace_floats(const GemmBlocking& b, std::size_t tile_m, std::size_t tile_n,
                                               std::size_t k, bool a_in_place, bool b_in_place) {
  const std::size_t kc = b.kc < k ? b.kc : k;
  const auto panels = [](std::size_t width, std::size_t block, std::size_t panel) {
    return ((width < block ? width : block) + panel - 1) / panel * panel;
  };
  return (a_in_place ? 0 : panels(tile_m, b.mc, b.mr) * kc) + (b_in_place ? 0 : panels(tile_n, b.nc, b.nr) * kc) +
         16;  // the B block starts 64-byte aligned
}

// The instruction sets a GEMM of this build may run with: all of them, or the one it is built for.
#if defined(TEENY_CPU_ISA_FIXED)
inline constexpr Isa kPlannedIsas[] = {static_cast<Isa>(TEENY_CPU_ISA_FIXED)};
#else
inline constexpr Isa kPlannedIsas[] = {Isa::portable, Isa::avx2, Isa::avx512};
#endif

// Bytes pack_a / pack_b take from their Memory for an operand of depth k and width `width`, with
// any instruction set the build may run with: the width padded to the panel (mr for A, nr for B)
// that pads it most.
constexpr std::size_t packed_bytes_bound(std::size_t k, std::size_t width) {
  std::size_t padded = 0;
  for (const Isa isa : kPlannedIsas) {
    for (const std::size_t panel : {blocking_of(isa).mr, blocking_of(isa).nr}) {
      const std::size_t w = (width + panel - 1) / panel * panel;
      padded = w > padded ? w : padded;
    }
  }
  const std::size_t floats = k * padded;
  return (floats == 0 ? 16 : floats) * sizeof(float);
}

// The most per-thread workspace (bytes) a GEMM of this shape with at least one operand packed (for
// the instruction set it runs with) asks for, with any instruction set the build may run with:
// gemm_workspace_bytes of such a GEMM never exceeds it. Only the blocked path has packed operands.
constexpr std::size_t gemm_workspace_bytes_bound(const GemmShape& shape, bool a_packed, bool b_packed) {
  if (shape.m == 0 || shape.n == 0 || shape.k == 0) return 0;
  std::size_t floats = 0;
  for (const Isa isa : kPlannedIsas) {
    const std::size_t f = blocked_workspace_floats(blocking_of(isa), shape.m, shape.n, shape.k, a_packed, b_packed);
    floats = f > floats ? f : floats;
  }
  return floats * sizeof(float);
}

}  // namespace teeny::cpu
