// sgemm against a naive double-precision reference: every instruction set this CPU has, odd and
// empty shapes, strided operands, both transposes, packed and unpacked operands, every epilogue,
// 1 to 4 threads; and dgemm, the portable double-precision one, against a long-double reference.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cpu/kernels/gemm.hpp"
#include "support/isa.hpp"

namespace {

using teeny::cpu::Activation;
using teeny::cpu::BiasAxis;
using teeny::cpu::ColumnOrder;
using teeny::cpu::Epilogue;
using teeny::cpu::GemmShape;
using teeny::cpu::Isa;
using teeny::cpu::PackedMatrix;
using teeny::cpu::ThreadPool;
using test_support::available_isas;
using test_support::IsaGuard;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kSentinel = 12345.0f;

constexpr Activation kActivations[] = {Activation::none,     Activation::relu,      Activation::leaky_relu,
                                       Activation::gelu_erf, Activation::gelu_tanh, Activation::silu,
                                       Activation::sigmoid,  Activation::tanh};

double activate_ref(Activation act, double x, double slope) {
  switch (act) {
    case Activation::none: return x;
    case Activation::relu: return x > 0 ? x : 0;
    case Activation::leaky_relu: return x < 0 ? slope * x : x;
    case Activation::gelu_erf: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case Activation::gelu_tanh:
      return 0.5 * x * (1 + std::tanh(std::sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
    case Activation::silu: return x / (1 + std::exp(-x));
    case Activation::sigmoid: return 1 / (1 + std::exp(-x));
    case Activation::tanh: return std::tanh(x);
  }
  return x;
}

// A row-major matrix with a leading dimension wider than its columns; the gap holds NaN so that a
// kernel reading outside the matrix poisons its result.
struct Strided {
  std::size_t rows = 0;
  std::size_t cols = 0;
  std::size_t ld = 0;
  std::vector<float> v;
  Strided(std::size_t r, std::size_t c, std::size_t pad, std::mt19937& rng) : rows(r), cols(c), ld(c + pad) {
    v.assign(r * ld + 1, kNaN);
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    for (std::size_t i = 0; i < r; ++i) {
      for (std::size_t j = 0; j < c; ++j) v[i * ld + j] = d(rng);
    }
  }
  float at(std::size_t i, std::size_t j) const { return v[i * ld + j]; }
};

struct Problem {
  GemmShape s;
  bool ta = false;
  bool tb = false;
  Strided a, b, c0;  // c0: C before the call (used when accumulating)
  std::vector<float> bias;
  Epilogue epi;
  std::vector<double> ref, tol;

  Problem(GemmShape shape, bool trans_a, bool trans_b, Activation act, int bias_mode, bool accumulate,
          std::mt19937& rng)
      : s(shape),
        ta(trans_a),
        tb(trans_b),
        a(trans_a ? shape.k : shape.m, trans_a ? shape.m : shape.k, 3, rng),
        b(trans_b ? shape.n : shape.k, trans_b ? shape.k : shape.n, 5, rng),
        c0(shape.m, shape.n, 2, rng) {
    epi.activation = act;
    epi.slope = 0.05f;
    epi.accumulate = accumulate;
    if (bias_mode != 0) {
      epi.bias_axis = bias_mode == 1 ? BiasAxis::column : BiasAxis::row;
      bias.resize(bias_mode == 1 ? s.n : s.m);
      std::uniform_real_distribution<float> d(-1.0f, 1.0f);
      for (float& x : bias) x = d(rng);
      epi.bias = bias.data();
    }
    compute_reference();
  }

  float op_a(std::size_t i, std::size_t k) const { return ta ? a.at(k, i) : a.at(i, k); }
  float op_b(std::size_t k, std::size_t j) const { return tb ? b.at(j, k) : b.at(k, j); }

  void compute_reference() {
    ref.assign(s.m * s.n, 0.0);
    tol.assign(s.m * s.n, 0.0);
    for (std::size_t i = 0; i < s.m; ++i) {
      for (std::size_t j = 0; j < s.n; ++j) {
        double acc = epi.accumulate ? c0.at(i, j) : 0.0;
        double mag = std::fabs(acc);
        for (std::size_t k = 0; k < s.k; ++k) {
          const double p = static_cast<double>(op_a(i, k)) * op_b(k, j);
          acc += p;
          mag += std::fabs(p);
        }
        if (epi.bias != nullptr) {
          const double bv = bias[epi.bias_axis == BiasAxis::column ? j : i];
          acc += bv;
          mag += std::fabs(bv);
        }
        // Float rounding of a K-term sum in any order, through an activation of slope <= 1.2,
        // plus the activation's own approximation error.
        const double pre_tol = 1e-5 * mag * (1.0 + static_cast<double>(s.k) / 1024.0) + 1e-30;
        ref[i * s.n + j] = activate_ref(epi.activation, acc, epi.slope);
        tol[i * s.n + j] = 1.2 * pre_tol + 1e-6 * (1.0 + std::fabs(acc));
      }
    }
  }

  // C before the call, with a sentinel in its row padding.
  Strided fresh_c() const {
    Strided c = c0;
    for (std::size_t i = 0; i < s.m; ++i) {
      for (std::size_t j = s.n; j < c.ld; ++j) c.v[i * c.ld + j] = kSentinel;
    }
    return c;
  }

  // Runs one variant and checks C (and that C's padding is untouched). mode: 0 raw, 1 packed A,
  // 2 packed B, 3 packed B with the column panels in descending order.
  void run_and_check(int mode, ThreadPool& pool, const std::string& what) const {
    Strided c = fresh_c();
    if (mode == 0) {
      teeny::cpu::sgemm(s, a.v.data(), a.ld, ta, b.v.data(), b.ld, tb, c.v.data(), c.ld, epi, pool);
    } else if (mode == 1) {
      const PackedMatrix pa = teeny::cpu::pack_a(s.m, s.k, a.v.data(), a.ld, ta);
      REQUIRE(pa.ok());
      REQUIRE(teeny::cpu::sgemm(s, pa, b.v.data(), b.ld, tb, c.v.data(), c.ld, epi, pool));
    } else {
      c.v = packed_b_result(mode, pool);
    }
    check(c, what);
  }

  // C after the call with B packed (mode 2; 3: the column panels in descending order, which
  // ColumnOrder allows for one row of A and is ignored elsewhere), for comparing them bit for bit.
  std::vector<float> packed_b_result(int mode, ThreadPool& pool) const {
    Strided c = fresh_c();
    const PackedMatrix pb = teeny::cpu::pack_b(s.k, s.n, b.v.data(), b.ld, tb);
    REQUIRE(pb.ok());
    const ColumnOrder order = mode == 3 ? ColumnOrder::descending : ColumnOrder::ascending;
    REQUIRE(teeny::cpu::sgemm(s, a.v.data(), a.ld, ta, pb, c.v.data(), c.ld, epi, pool, order));
    return c.v;
  }

  void check(const Strided& c, const std::string& what) const {
    std::size_t bad = 0;
    std::size_t first_i = 0, first_j = 0;
    for (std::size_t i = 0; i < s.m; ++i) {
      for (std::size_t j = 0; j < c.ld; ++j) {
        const float got = c.v[i * c.ld + j];
        const bool ok = j < s.n ? std::fabs(got - ref[i * s.n + j]) <= tol[i * s.n + j] : got == kSentinel;
        if (!ok && bad++ == 0) {
          first_i = i;
          first_j = j;
        }
      }
    }
    INFO(what);
    INFO("first mismatch at (", first_i, ", ", first_j, ")");
    if (bad != 0 && first_j < s.n) {
      INFO("got ", c.v[first_i * c.ld + first_j], ", want ", ref[first_i * s.n + first_j]);
      CHECK(bad == 0);
    } else {
      CHECK(bad == 0);
    }
  }
};

std::string describe(const GemmShape& s, bool ta, bool tb, int mode, std::size_t threads, Isa isa, const Epilogue& e) {
  return "M=" + std::to_string(s.m) + " N=" + std::to_string(s.n) + " K=" + std::to_string(s.k) +
         " ta=" + std::to_string(ta) + " tb=" + std::to_string(tb) + " mode=" + std::to_string(mode) +
         " threads=" + std::to_string(threads) + " isa=" + teeny::cpu::isa_name(isa) +
         " act=" + std::to_string(static_cast<int>(e.activation)) + " bias=" + std::to_string(e.bias != nullptr) + "/" +
         std::to_string(static_cast<int>(e.bias_axis)) + " acc=" + std::to_string(e.accumulate);
}

std::vector<std::unique_ptr<ThreadPool>> make_pools() {
  std::vector<std::unique_ptr<ThreadPool>> pools;
  for (std::size_t t = 1; t <= 4; ++t) pools.push_back(std::make_unique<ThreadPool>(t));
  return pools;
}

}  // namespace

TEST_CASE("sgemm matches a double reference for every ISA, shape, transpose, packing and thread count") {
  const IsaGuard guard;
  const auto pools = make_pools();
  const GemmShape shapes[] = {
      {0, 0, 0},      {0, 5, 3},      {4, 0, 3},     {3, 4, 0},      {1, 1, 1},      {7, 13, 5},      {33, 65, 17},
      {1, 1000, 784}, {784, 1, 3},    {13, 1, 70},   {97, 131, 203}, {64, 512, 100}, {29, 1000, 400}, {1600, 20, 9},
      {2, 40, 1100},  {3000, 3, 200}, {4, 300, 500}, {6, 333, 100},  {500, 7, 64},   {8, 50, 40},
  };
  std::mt19937 rng(42);
  int variant = 0;
  for (const GemmShape& s : shapes) {
    for (int t = 0; t < 4; ++t) {
      const bool ta = (t & 1) != 0;
      const bool tb = (t & 2) != 0;
      // Cycle through the epilogues so that every one meets every shape class somewhere.
      const Activation act = kActivations[variant % 8];
      const int bias_mode = variant % 3;
      const bool accumulate = variant % 5 == 2;
      ++variant;
      const Problem p(s, ta, tb, act, bias_mode, accumulate, rng);
      for (const Isa isa : available_isas()) {
        REQUIRE(teeny::cpu::set_isa(isa) == isa);
        for (int mode = 0; mode < 4; ++mode) {
          for (const auto& pool : pools) {
            p.run_and_check(mode, *pool, describe(s, ta, tb, mode, pool->size(), isa, p.epi));
          }
        }
      }
    }
  }
}

TEST_CASE("every epilogue: activations, column and row bias, accumulate") {
  const IsaGuard guard;
  ThreadPool one(1);
  ThreadPool three(3);
  std::mt19937 rng(7);
  // {1, 70, 800}: one row of A read in place over three K blocks (a batch-1 Linear's input).
  const GemmShape shapes[] = {{37, 75, 29}, {1, 40, 3}, {50, 300, 64}, {1, 70, 800}};
  for (const GemmShape& s : shapes) {
    for (const Activation act : kActivations) {
      for (int bias_mode = 0; bias_mode < 3; ++bias_mode) {
        for (const bool accumulate : {false, true}) {
          const Problem p(s, false, true, act, bias_mode, accumulate, rng);
          for (const Isa isa : available_isas()) {
            REQUIRE(teeny::cpu::set_isa(isa) == isa);
            for (ThreadPool* pool : {&one, &three}) {
              p.run_and_check(0, *pool, describe(s, false, true, 0, pool->size(), isa, p.epi));
              p.run_and_check(2, *pool, describe(s, false, true, 2, pool->size(), isa, p.epi));
              p.run_and_check(3, *pool, describe(s, false, true, 3, pool->size(), isa, p.epi));
            }
          }
        }
      }
    }
  }
}

// A batch-1 layer alternates the order of its column panels from call to call: its results must be
// the same bits in either order (each element's sum over the K blocks runs in the same order).
TEST_CASE("one row of A against a packed B: the same bits in either column order") {
  const IsaGuard guard;
  const auto pools = make_pools();
  std::mt19937 rng(11);
  // Partial last panels, one to three K blocks, both layouts of B, three activations, each bias
  // axis and accumulate.
  const GemmShape shapes[] = {{1, 70, 800}, {1, 1000, 784}, {1, 33, 5}, {1, 512, 512}, {1, 17, 385}};
  int variant = 0;
  for (const GemmShape& s : shapes) {
    for (const Activation act : {Activation::none, Activation::relu, Activation::gelu_erf}) {
      const Problem p(s, false, variant % 2 == 1, act, variant % 3, variant % 4 == 3, rng);
      ++variant;
      for (const Isa isa : available_isas()) {
        REQUIRE(teeny::cpu::set_isa(isa) == isa);
        for (const auto& pool : pools) {
          CAPTURE(describe(s, false, p.tb, 3, pool->size(), isa, p.epi));
          const std::vector<float> ascending = p.packed_b_result(2, *pool);
          const std::vector<float> descending = p.packed_b_result(3, *pool);
          CHECK(std::equal(
              ascending.begin(), ascending.end(), descending.begin(), descending.end(),
              [](float a, float b) { return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b); }));
        }
      }
    }
  }
}

TEST_CASE("activations match PyTorch's formulas over a wide input range") {
  const IsaGuard guard;
  ThreadPool pool(1);
  // C = x * 1 with K = 1 feeds every x straight through the epilogue.
  std::vector<float> xs;
  for (int i = -4000; i <= 4000; ++i) xs.push_back(static_cast<float>(i) * 0.005f);  // [-20, 20]
  for (const float x : {-100.0f, -88.5f, -50.0f, 50.0f, 88.5f, 100.0f, 1e-7f, -1e-7f, 0.0f, -0.0f}) {
    xs.push_back(x);
  }
  const float one = 1.0f;
  std::vector<float> y(xs.size());
  for (const Isa isa : available_isas()) {
    REQUIRE(teeny::cpu::set_isa(isa) == isa);
    for (const Activation act : kActivations) {
      Epilogue e;
      e.activation = act;
      e.slope = 0.2f;
      teeny::cpu::sgemm({xs.size(), 1, 1}, xs.data(), 1, false, &one, 1, false, y.data(), 1, e, pool);
      double worst = 0;
      for (std::size_t i = 0; i < xs.size(); ++i) {
        const double want = activate_ref(act, xs[i], 0.2);
        // Absolute error for small outputs, relative for large ones.
        worst = std::fmax(worst, std::fabs(y[i] - want) / std::fmax(1.0, std::fabs(want)));
      }
      INFO("isa=", teeny::cpu::isa_name(isa), " act=", static_cast<int>(act));
      CHECK(worst < 1e-6);
    }
  }
}

TEST_CASE("a ReLU fused into the microkernel keeps NaN and zeroes negatives only after the last K block") {
  const IsaGuard guard;
  ThreadPool pool(1);
  // 13 x 40 x 500: two K blocks of every kernel set, a partial row tile and a partial last vector.
  // Every product is +1 or -1: even rows sum to -500, odd ones to +500; row 3 has a NaN at k = 7;
  // row 5 sums to -16 or less over the first K block and to +100 over all of K, which a ReLU
  // applied to each block's partial sums would turn into 116 or more.
  const std::size_t m = 13, n = 40, k = 500;
  std::vector<float> a(m * k), b(k * n, 1.0f), c(m * n, 99.0f);
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t kk = 0; kk < k; ++kk) a[i * k + kk] = i % 2 == 0 ? -1.0f : 1.0f;
  }
  a[3 * k + 7] = kNaN;
  for (std::size_t kk = 0; kk < 200; ++kk) a[5 * k + kk] = -1.0f;
  Epilogue e;
  e.activation = Activation::relu;
  for (const Isa isa : available_isas()) {
    REQUIRE(teeny::cpu::set_isa(isa) == isa);
    teeny::cpu::sgemm({m, n, k}, a.data(), k, false, b.data(), n, false, c.data(), n, e, pool);
    INFO("isa=", teeny::cpu::isa_name(isa));
    for (std::size_t j = 0; j < n; ++j) {
      CHECK(c[0 * n + j] == 0.0f);
      CHECK(c[1 * n + j] == 500.0f);
      CHECK(std::isnan(c[3 * n + j]));
      CHECK(c[5 * n + j] == 100.0f);
      CHECK(c[12 * n + j] == 0.0f);
    }
  }
}

TEST_CASE("the 2x2 max pool a folded convolution uses: every ISA, widths around each vector, NaN wins") {
  const IsaGuard guard;
  // Rows `pitch` apart with columns past 2 * wo (a convolution's wide rows), and values whose
  // maximum sits in each of a window's four places in turn; NaNs in some windows.
  for (const std::size_t wo : {1, 3, 5, 7, 8, 9, 14, 15, 16, 17, 31, 33}) {
    const std::size_t ho = 3, pitch = 2 * wo + 3;
    std::vector<float> x(2 * ho * pitch);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37) % 23) - 11.0f;
    x[0] = kNaN;                           // top left of the first window
    if (wo > 2) x[pitch + 5] = kNaN;       // bottom right of window 2
    if (wo > 6) x[2 * pitch + 12] = kNaN;  // row 1's window 6, top left
    for (const Isa isa : available_isas()) {
      REQUIRE(teeny::cpu::set_isa(isa) == isa);
      INFO("isa=", teeny::cpu::isa_name(isa), " wo=", wo);
      std::vector<float> y(ho * wo + 1, 99.0f);  // one more: must stay untouched
      teeny::cpu::max_pool_2x2(x.data(), pitch, y.data(), ho, wo);
      for (std::size_t r = 0; r < ho; ++r) {
        for (std::size_t c = 0; c < wo; ++c) {
          const float* top = x.data() + 2 * r * pitch + 2 * c;
          const float window[4] = {top[0], top[1], top[pitch], top[pitch + 1]};
          bool nan = false;
          float expected = -INFINITY;
          for (const float v : window) {
            nan = nan || std::isnan(v);
            expected = std::max(expected, v);
          }
          if (nan) {
            CHECK(std::isnan(y[r * wo + c]));
          } else {
            CHECK(y[r * wo + c] == expected);
          }
        }
      }
      CHECK(y[ho * wo] == 99.0f);
    }
  }
}

TEST_CASE("the row copy a convolution's planes use: every ISA, zero margins, widths around each vector") {
  const IsaGuard guard;
  for (const std::size_t width : {0, 1, 3, 7, 8, 9, 10, 15, 16, 17, 28, 31, 32, 33, 47}) {
    // (lead, count) pairs: no margin, margins on either side or both, leads past a vector, nothing copied.
    std::vector<std::pair<std::size_t, std::size_t>> spans{{0, width}, {0, 0}};
    for (const std::size_t lead : {1, 2, 3, 7, 9, 17}) {
      if (lead > width) continue;
      spans.emplace_back(lead, width - lead);
      spans.emplace_back(0, width - lead);
      spans.emplace_back(lead, 0);
      if (2 * lead < width) spans.emplace_back(lead, width - 2 * lead);
    }
    // Two planes of three rows; the destination's planes have a gap of a row between them.
    const std::size_t planes = 2, rows = 3, src_pitch = width + 5, dst_pitch = width + 3;
    const std::size_t src_plane = rows * src_pitch + 2, dst_plane = (rows + 1) * dst_pitch;
    for (const auto& [lead, count] : spans) {
      // The source ends where the last row's copied floats do, so that reading past them would show
      // up under AddressSanitizer.
      std::vector<float> src(src_plane + (rows - 1) * src_pitch + count);
      for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i) + 0.5f;
      for (const Isa isa : available_isas()) {
        REQUIRE(teeny::cpu::set_isa(isa) == isa);
        INFO("isa=", teeny::cpu::isa_name(isa), " width=", width, " lead=", lead, " count=", count);
        std::vector<float> dst(planes * dst_plane + 1, -1.0f);
        teeny::cpu::copy_rows({.src = src.data(),
                               .src_pitch = src_pitch,
                               .src_plane = src_plane,
                               .dst = dst.data(),
                               .dst_pitch = dst_pitch,
                               .dst_plane = dst_plane,
                               .planes = planes,
                               .rows = rows,
                               .width = width,
                               .lead = lead,
                               .count = count});
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < dst.size(); ++i) {
          const std::size_t p = i / dst_plane, r = i % dst_plane / dst_pitch, c = i % dst_plane % dst_pitch;
          float expected = -1.0f;  // untouched
          if (p < planes && r < rows && c < width) {
            expected = c >= lead && c < lead + count ? src[p * src_plane + r * src_pitch + c - lead] : 0.0f;
          }
          wrong += dst[i] != expected;
        }
        CHECK(wrong == 0);
      }
    }
  }
}

TEST_CASE("K == 0 applies only the epilogue; M or N == 0 touches nothing") {
  ThreadPool pool(2);
  const float bias[3] = {1.0f, -2.0f, 3.0f};
  float c[6] = {5, 5, 5, 5, 5, 5};
  Epilogue e;
  e.bias = bias;
  e.activation = Activation::relu;
  teeny::cpu::sgemm({2, 3, 0}, nullptr, 0, false, nullptr, 3, false, c, 3, e, pool);
  CHECK(c[0] == 1.0f);
  CHECK(c[1] == 0.0f);
  CHECK(c[5] == 3.0f);
  e.accumulate = true;
  e.activation = Activation::none;
  teeny::cpu::sgemm({2, 3, 0}, nullptr, 0, false, nullptr, 3, false, c, 3, e, pool);
  CHECK(c[0] == 2.0f);
  CHECK(c[1] == -2.0f);
  CHECK(c[5] == 6.0f);
  float untouched[4] = {7, 7, 7, 7};
  teeny::cpu::sgemm({0, 4, 5}, nullptr, 5, false, nullptr, 4, false, untouched, 4, e, pool);
  teeny::cpu::sgemm({4, 0, 5}, nullptr, 5, false, nullptr, 4, false, untouched, 1, e, pool);
  CHECK(untouched[0] == 7.0f);
  CHECK(untouched[3] == 7.0f);
}

TEST_CASE("a packed operand keeps working after the active ISA changes") {
  const IsaGuard guard;
  ThreadPool pool(2);
  std::mt19937 rng(3);
  const Problem pb(GemmShape{45, 70, 400}, false, true, Activation::gelu_erf, 1, false, rng);
  const Problem pa(GemmShape{70, 45, 400}, true, false, Activation::silu, 2, true, rng);
  for (const Isa pack_isa : available_isas()) {
    REQUIRE(teeny::cpu::set_isa(pack_isa) == pack_isa);
    const PackedMatrix b = teeny::cpu::pack_b(pb.s.k, pb.s.n, pb.b.v.data(), pb.b.ld, pb.tb);
    const PackedMatrix a = teeny::cpu::pack_a(pa.s.m, pa.s.k, pa.a.v.data(), pa.a.ld, pa.ta);
    REQUIRE(b.ok());
    REQUIRE(a.ok());
    CHECK(b.isa() == pack_isa);
    CHECK(b.operand() == PackedMatrix::Operand::b);
    CHECK(a.operand() == PackedMatrix::Operand::a);
    CHECK(b.rows() == pb.s.k);
    CHECK(b.cols() == pb.s.n);
    for (const Isa run_isa : available_isas()) {
      REQUIRE(teeny::cpu::set_isa(run_isa) == run_isa);
      const std::string what =
          std::string("packed for ") + teeny::cpu::isa_name(pack_isa) + ", run on " + teeny::cpu::isa_name(run_isa);
      Strided cb = pb.fresh_c();
      REQUIRE(teeny::cpu::sgemm(pb.s, pb.a.v.data(), pb.a.ld, pb.ta, b, cb.v.data(), cb.ld, pb.epi, pool));
      pb.check(cb, what);
      Strided ca = pa.fresh_c();
      REQUIRE(teeny::cpu::sgemm(pa.s, a, pa.b.v.data(), pa.b.ld, pa.tb, ca.v.data(), ca.ld, pa.epi, pool));
      pa.check(ca, what);
    }
  }
}

TEST_CASE("packing reports failure instead of crashing, and sgemm rejects bad packed operands") {
  ThreadPool pool(1);
  const float x[4] = {1, 2, 3, 4};
  // Sizes whose byte count overflows: packing must fail cleanly before allocating.
  const std::size_t huge = std::numeric_limits<std::size_t>::max() / 8;
  CHECK_FALSE(teeny::cpu::pack_b(huge, 1000, x, 1000, false).ok());
  CHECK_FALSE(teeny::cpu::pack_a(1000, huge, x, huge, false).ok());
  CHECK_FALSE(PackedMatrix{}.ok());

  float c[4] = {9, 9, 9, 9};
  const PackedMatrix empty;
  CHECK_FALSE(teeny::cpu::sgemm({2, 2, 2}, x, 2, false, empty, c, 2, {}, pool));
  const PackedMatrix b = teeny::cpu::pack_b(2, 2, x, 2, false);
  REQUIRE(b.ok());
  CHECK_FALSE(teeny::cpu::sgemm({2, 3, 2}, x, 2, false, b, c, 2, {}, pool));  // wrong N
  CHECK_FALSE(teeny::cpu::sgemm({2, 2, 2}, b, x, 2, false, c, 2, {}, pool));  // B where A is expected
  CHECK(c[0] == 9.0f);

  // Moving transfers ownership; an empty shape still packs to a valid (empty) operand.
  PackedMatrix moved = teeny::cpu::pack_b(2, 2, x, 2, false);
  PackedMatrix other = std::move(moved);
  CHECK(other.ok());
  CHECK(teeny::cpu::pack_b(0, 7, x, 7, false).ok());
  CHECK(teeny::cpu::pack_a(7, 0, x, 0, false).ok());
}

TEST_CASE("what packing and the GEMM workspace take stays within the planned bounds, for every width") {
  // The heap, remembering the largest piece asked for.
  struct Largest final : teeny::cpu::Memory {
    std::size_t bytes = 0;
    void* allocate(std::size_t n) override {
      bytes = std::max(bytes, n);
      return teeny::cpu::heap_memory().allocate(n);
    }
    void release(void* piece) override { teeny::cpu::heap_memory().release(piece); }
  };
  const IsaGuard guard;
  const std::vector<float> x(std::size_t{200} * 400, 1.0f);
  for (const Isa isa : available_isas()) {
    REQUIRE(teeny::cpu::set_isa(isa) == isa);
    CAPTURE(teeny::cpu::isa_name(isa));
    for (const std::size_t k : {1, 5, 384, 400}) {
      for (std::size_t width = 1; width <= 200; ++width) {
        CAPTURE(k);
        CAPTURE(width);
        Largest a_memory;
        Largest b_memory;
        const PackedMatrix a = teeny::cpu::pack_a(width, k, x.data(), k, false, a_memory);
        const PackedMatrix b = teeny::cpu::pack_b(k, width, x.data(), width, false, b_memory);
        REQUIRE(a.ok());
        REQUIRE(b.ok());
        CHECK(a_memory.bytes <= teeny::cpu::packed_bytes_bound(k, width));
        CHECK(b_memory.bytes <= teeny::cpu::packed_bytes_bound(k, width));
        for (const std::size_t m : {1, 64, 2000}) {
          const GemmShape shape{m, width, k};
          CHECK(teeny::cpu::gemm_workspace_bytes(shape, true, false) <=
                teeny::cpu::gemm_workspace_bytes_bound(shape, true, false));
          CHECK(teeny::cpu::gemm_workspace_bytes(shape, false, true) <=
                teeny::cpu::gemm_workspace_bytes_bound(shape, false, true));
        }
      }
    }
  }
}

TEST_CASE("ISA selection clamps to what the CPU has") {
  const IsaGuard guard;
  const Isa best = teeny::cpu::detected_isa();
  CHECK(teeny::cpu::set_isa(Isa::portable) == Isa::portable);
  CHECK(teeny::cpu::active_isa() == Isa::portable);
  CHECK(teeny::cpu::set_isa(Isa::avx512) <= best);
  CHECK(std::string(teeny::cpu::isa_name(Isa::avx2)) == "avx2");
  CHECK(teeny::cpu::gemm_workspace_bytes({64, 512, 784}, false, false) > 0);
  CHECK(teeny::cpu::gemm_workspace_bytes({64, 512, 784}, false, true) <
        teeny::cpu::gemm_workspace_bytes({64, 512, 784}, false, false));
  CHECK(teeny::cpu::gemm_workspace_bytes({0, 512, 784}, false, false) == 0);
}

TEST_CASE("dgemm matches a long-double reference: shapes, transposes, strides, every epilogue, threads") {
  std::mt19937 rng(7);
  std::normal_distribution<double> dist(0.0, 1.0);
  const GemmShape shapes[] = {{1, 1, 1}, {3, 5, 7}, {17, 9, 300}, {64, 300, 40}, {5, 0, 3}, {4, 6, 0}};
  for (const std::size_t threads : {1u, 3u}) {
    ThreadPool pool(threads);
    for (const GemmShape& s : shapes) {
      for (const bool trans_a : {false, true}) {
        for (const bool trans_b : {false, true}) {
          for (const Activation act : kActivations) {
            INFO(threads << " threads, " << s.m << "x" << s.n << "x" << s.k << " ta " << trans_a << " tb " << trans_b
                         << " act " << static_cast<int>(act));
            // Leading dimensions one wider than needed, so a stride bug reads the wrong element.
            const std::size_t lda = (trans_a ? s.m : s.k) + 1;
            const std::size_t ldb = (trans_b ? s.k : s.n) + 1;
            const std::size_t ldc = s.n + 2;
            std::vector<double> a((trans_a ? s.k : s.m) * lda + 1);
            std::vector<double> b((trans_b ? s.n : s.k) * ldb + 1);
            std::vector<double> c(s.m * ldc + 1);
            std::vector<double> bias(std::max(s.m, s.n));
            for (double& v : a) v = dist(rng);
            for (double& v : b) v = dist(rng);
            for (double& v : c) v = dist(rng);
            for (double& v : bias) v = dist(rng);
            teeny::cpu::GemmEpilogue<double> e;
            e.activation = act;
            e.slope = 0.2;
            e.accumulate = act == Activation::silu || act == Activation::none;
            e.bias = act == Activation::tanh ? nullptr : bias.data();
            e.bias_axis = act == Activation::relu ? BiasAxis::row : BiasAxis::column;
            const std::vector<double> before = c;
            teeny::cpu::dgemm(s, a.data(), lda, trans_a, b.data(), ldb, trans_b, c.data(), ldc, e, pool);
            for (std::size_t i = 0; i < s.m; ++i) {
              for (std::size_t j = 0; j < s.n; ++j) {
                long double acc = e.accumulate ? before[i * ldc + j] : 0.0L;
                for (std::size_t k = 0; k < s.k; ++k) {
                  const double av = trans_a ? a[k * lda + i] : a[i * lda + k];
                  const double bv = trans_b ? b[j * ldb + k] : b[k * ldb + j];
                  acc += static_cast<long double>(av) * bv;
                }
                if (e.bias != nullptr) acc += e.bias_axis == BiasAxis::column ? bias[j] : bias[i];
                const double want = activate_ref(act, static_cast<double>(acc), e.slope);
                // Sums of up to 300 products of unit normals: a few ulps of their magnitude.
                REQUIRE(std::abs(c[i * ldc + j] - want) <= 1e-13 * (1.0 + std::sqrt(static_cast<double>(s.k))));
              }
              for (std::size_t j = s.n; j < ldc; ++j) CHECK(c[i * ldc + j] == before[i * ldc + j]);  // the gap
            }
          }
        }
      }
    }
  }
}
