// Winograd F(4x4, 3x3) and F(2x2, 3x3) transforms for the CPU backend's 3x3 stride-1 convolutions.
//
// An m x m block of outputs (a tile) of a 3x3 convolution is A^T [(G g G^T) . (B^T d B)] A, where d
// is the tile's (m + 2) x (m + 2) input patch, g the 3x3 filter and "." the element-wise product
// (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", 2015; interpolation points 0,
// +-1, +-2 and infinity for m = 4, 0, +-1 and infinity for m = 2). Summed over input channels, the
// element-wise products become one GEMM per point xi of the transformed tile:
//   M[xi][o, t] = sum over c of U[xi][o, c] * V[xi][c, t]
// with U the transformed filters (made once, at load) and V the transformed input tiles.
//   F(4x4, 3x3): 36 points, 36 multiply-adds per 16 outputs and channel pair instead of 144 (4x
//     fewer), and U is 4x the size of the filters.
//   F(2x2, 3x3): 16 points, 16 per 4 outputs instead of 36 (2.25x fewer), U 1.8x the filters. It
//     wins where U is read from memory every forward (wide layers on small maps at batch 1) and
//     where 4x4 tiles would cover many outputs past the map's edge (a 7x7 map: 64 for 49).
//
// These are the transforms; the GEMMs are teeny's SGEMM. The input and output transforms run over
// L consecutive tiles of a tile row at once, one per vector lane, with the instruction set the
// GEMM runs with (AVX-512: 16 lanes, AVX2: 8, portable C++: 4).
#pragma once

#include <cstddef>
#include <cstdint>

namespace teeny::cpu::winograd {

inline constexpr std::int64_t kMaxPoints = 36;  // points of a transformed tile (GEMMs), at most: F(4x4, 3x3)
inline constexpr std::int64_t kMaxLanes = 16;   // tiles per vector, at most

// One image plane's tiling into m x m tiles (m = 2 or 4): output (oh, ow) reads input
// (oh - pad_h + i, ow - pad_w + j) for i, j in 0..2 (zero outside the plane). Tile t covers
// outputs m * (t / tiles_w) + 0..m-1 by m * (t % tiles_w) + 0..m-1; tiles past the output's edge
// are computed and cut.
struct Plane {
  std::int64_t m = 4;           // outputs per tile side
  std::int64_t h = 0, w = 0;    // input
  std::int64_t ho = 0, wo = 0;  // output
  std::int64_t pad_h = 0, pad_w = 0;
  std::int64_t tiles_h = 0, tiles_w = 0;
  constexpr std::int64_t tiles() const { return tiles_h * tiles_w; }
  constexpr std::int64_t points() const { return (m + 2) * (m + 2); }  // GEMMs per convolution
};

constexpr Plane plane_of(std::int64_t h, std::int64_t w, std::int64_t pad_h, std::int64_t pad_w, std::int64_t m) {
  Plane p;
  p.m = m;
  p.h = h;
  p.w = w;
  p.pad_h = pad_h;
  p.pad_w = pad_w;
  p.ho = h + 2 * pad_h - 2;
  p.wo = w + 2 * pad_w - 2;
  p.tiles_h = p.ho > 0 ? (p.ho + m - 1) / m : 0;
  p.tiles_w = p.wo > 0 ? (p.wo + m - 1) / m : 0;
  return p;
}

// Where a block of tiles' transformed values are: value (xi, row, j) of the block (row: an input
// channel in V, an output channel in M; j: the block's j-th tile) is at
// data[xi * point_stride + row * row_stride + j]. A transform writes whole vectors of lanes, so a
// row has room for kMaxLanes floats past the block's last tile.
struct Points {
  float* data = nullptr;
  std::int64_t point_stride = 0;
  std::int64_t row_stride = 0;
};

// The filters [outs][ins][3][3] as (m + 2)^2 matrices U[xi][o][c] for F(m x m, 3x3) (outs x ins
// each, row-major, at u + xi * outs * ins), computed in double and rounded once.
void transform_filters(const float* w, std::int64_t outs, std::int64_t ins, std::int64_t m, float* u);

// Floats of one zero-padded input row in transform_input's staging: what a plane's tiles read.
constexpr std::int64_t staged_row_floats(const Plane& plane) { return plane.m * plane.tiles_w + 2; }

// Floats of staging transform_input needs for blocks of up to `block` tiles: the zero-padded input
// rows of one channel that a block's tile rows read, one after another, and room for a whole
// vector of tiles read from the last tile (whose lanes past the run are not used).
constexpr std::int64_t input_staging_floats(const Plane& plane, std::int64_t block) {
  if (plane.tiles_w == 0 || block <= 0) return 0;
  const std::int64_t tile_rows = (block - 1) / plane.tiles_w + 2;  // a block may start mid-row
  return (plane.m * tile_rows + 2) * staged_row_floats(plane) + plane.m * kMaxLanes;
}

// V for channels [0, channels) of `x` ([channels][h][w]) and tiles [first, first + count), with
// `staging` (input_staging_floats(plane, count) floats, any alignment) to work in.
void transform_input(const float* x, std::int64_t channels, const Plane& plane, std::int64_t first, std::int64_t count,
                     const Points& v, float* staging);

// What is added to each output as it is written: its channel's bias, then the residual at the same
// place in `residual` (laid out as the output), then ReLU. Each part is optional.
struct OutputEpilogue {
  const float* bias = nullptr;      // [outs]
  const float* residual = nullptr;  // [outs][ho][wo]
  bool relu = false;
};

// The outputs of tiles [first, first + count) for channels [0, outs) into y ([outs][ho][wo]),
// from M (read through `m`, whose data is not changed).
void transform_output(const Points& m, std::int64_t outs, const Plane& plane, std::int64_t first, std::int64_t count,
                      const OutputEpilogue& epilogue, float* y);

// Tiles the active instruction set's transforms take at once (vector lanes).
std::int64_t lanes();

}  // namespace teeny::cpu::winograd
