// IDX files (raw and gzipped) built byte by byte here, the Fashion-MNIST loader on small generated
// files, and facts of the real Fashion-MNIST test set when Debian's dataset-fashion-mnist is installed.
#include <doctest/doctest.h>
#include <zlib.h>

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/io_test_support.hpp"

import teeny.core;
import teeny.io;

using teeny::ConcreteShape;
using teeny::DType;
using teeny::Errc;

namespace {

using io_test::contains;

/// An IDX file: magic 0 0 code rank, big-endian u32 dims, then `payload` (already big-endian).
std::vector<std::uint8_t> idx_file(std::uint8_t code, std::vector<std::uint32_t> dims,
                                   const std::vector<std::uint8_t>& payload) {
  std::vector<std::uint8_t> out = {0, 0, code, static_cast<std::uint8_t>(dims.size())};
  for (std::uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(d >> shift));
  }
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

/// Big-endian bytes of integers (two's complement) or of floats' bit patterns.
template <class T>
std::vector<std::uint8_t> big_endian(std::initializer_list<T> values) {
  std::vector<std::uint8_t> out;
  for (T v : values) {
    std::uint64_t bits = 0;
    if constexpr (sizeof(T) == 8) {
      bits = std::bit_cast<std::uint64_t>(v);
    } else if constexpr (sizeof(T) == 4) {
      bits = std::bit_cast<std::uint32_t>(v);
    } else if constexpr (sizeof(T) == 2) {
      bits = std::bit_cast<std::uint16_t>(v);
    } else {
      bits = std::bit_cast<std::uint8_t>(v);
    }
    for (int shift = 8 * static_cast<int>(sizeof(T)) - 8; shift >= 0; shift -= 8) {
      out.push_back(static_cast<std::uint8_t>(bits >> shift));
    }
  }
  return out;
}

void write_gz(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  if (!bytes.empty())
    REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) == static_cast<int>(bytes.size()));
  REQUIRE(gzclose(f) == Z_OK);
}

using io_test::values_of;

}  // namespace

TEST_CASE("read_idx: every element type, raw and gzipped") {
  io_test::TempDir dir;
  const auto check_both = [&](const std::vector<std::uint8_t>& file, auto&& check) {
    io_test::write_bytes(dir / "a.idx", file);
    write_gz(dir / "a.idx.gz", file);
    for (const std::string& path : {dir / "a.idx", dir / "a.idx.gz"}) {
      CAPTURE(path);
      auto a = teeny::read_idx(path);
      REQUIRE_MESSAGE(a, (a ? "" : a.error().to_string()));
      check(*a);
    }
  };
  check_both(idx_file(0x08, {2, 3}, {0, 1, 2, 253, 254, 255}), [](const teeny::IdxArray& a) {
    CHECK(a.dtype == DType::u8);
    CHECK(a.shape == ConcreteShape{2, 3});
    CHECK(a.data.shape() == ConcreteShape{2, 3});
    CHECK(values_of<std::uint8_t>(a.data) == std::vector<std::uint8_t>{0, 1, 2, 253, 254, 255});
  });
  check_both(idx_file(0x09, {3}, big_endian<std::int8_t>({-128, -1, 127})), [](const teeny::IdxArray& a) {
    CHECK(a.dtype == DType::i8);
    CHECK(values_of<std::int8_t>(a.data) == std::vector<std::int8_t>{-128, -1, 127});
  });
  check_both(idx_file(0x0B, {2}, big_endian<std::int16_t>({-2, 0x1234})), [](const teeny::IdxArray& a) {
    CHECK(a.dtype == DType::i16);
    CHECK(values_of<std::int16_t>(a.data) == std::vector<std::int16_t>{-2, 0x1234});
  });
  check_both(idx_file(0x0C, {1, 2}, big_endian<std::int32_t>({-70000, 0x12345678})), [](const teeny::IdxArray& a) {
    CHECK(a.dtype == DType::i32);
    CHECK(values_of<std::int32_t>(a.data) == std::vector<std::int32_t>{-70000, 0x12345678});
  });
  check_both(idx_file(0x0D, {2}, big_endian<float>({1.5f, -0.1f})), [](const teeny::IdxArray& a) {
    CHECK(a.dtype == DType::f32);
    CHECK(values_of<float>(a.data) == std::vector<float>{1.5f, -0.1f});
  });
  check_both(idx_file(0x0E, {1, 1, 1}, big_endian<double>({-2.75})), [](const teeny::IdxArray& a) {
    CHECK(a.dtype == DType::f64);
    CHECK(a.shape == ConcreteShape{1, 1, 1});
    CHECK(values_of<double>(a.data) == std::vector<double>{-2.75});
  });
  check_both(idx_file(0x08, {0, 28}, {}), [](const teeny::IdxArray& a) { CHECK(a.data.numel() == 0); });
}

TEST_CASE("read_idx: malformed files are errors naming the file") {
  io_test::TempDir dir;
  struct Case {
    std::vector<std::uint8_t> bytes;
    std::string_view expected;
  };
  const Case cases[] = {
      {{0, 0}, "truncated: 2 bytes, fewer than the 4-byte magic"},
      {{0x50, 0x4b, 3, 4, 0, 0}, "wrong magic: an IDX file starts with two zero bytes, this one with 80 and 75"},
      {{0, 0, 0x0A, 1, 0, 0, 0, 1, 7}, "unknown type code 10 (supported: 8 u8, 9 i8, 11 i16, 12 i32, 13 f32, 14 f64)"},
      {{0, 0, 8, 9}, "header says 9 dims; at most 8 are supported"},
      {{0, 0, 8, 3, 0, 0, 0, 1}, "truncated: 8 bytes, fewer than the 16-byte header of 3 dims"},
      {idx_file(0x08, {2, 2}, {1, 2, 3}),
       "dims [2, 2] of u8 need 4 bytes of data, the file has 3 (truncated, or absurd dims)"},
      {idx_file(0x0C, {2}, {0, 0, 0, 1, 0, 0, 0, 2, 9}),
       "dims [2] of i32 need 8 bytes of data, the file has 9 (trailing bytes)"},
      {idx_file(0x0E, {0xffffffff, 0xffffffff, 0xffffffff}, {1}),
       "shape [4294967295, 4294967295, 4294967295] has more than 2^56 elements"},
      // Found by tests/fuzz/fuzz_idx: no elements, but the shape's numel() overflowed before the 0.
      {{0x00, 0x00, 0x0e, 0x03, 0xf8, 0x00, 0x00, 0x40, 0xe1, 0x0a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00},
       "shape [4160749632, 3775528960, 0] is empty, but its other dims multiply past 2^56"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.expected);
    io_test::write_bytes(dir / "bad.idx", c.bytes);
    auto a = teeny::read_idx(dir / "bad.idx");
    REQUIRE_FALSE(a);
    CHECK(a.error().code() == Errc::parse);
    CHECK(contains(a.error().message(), "IDX file '" + (dir / "bad.idx") + "': "));
    CHECK_MESSAGE(contains(a.error().message(), c.expected), a.error().message());
  }

  auto missing = teeny::read_idx(dir / "none.idx");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code() == Errc::not_found);
  CHECK(contains(missing.error().message(), "none.idx"));

  auto directory = teeny::read_idx(dir.path());
  REQUIRE_FALSE(directory);
  CHECK(directory.error().code() == Errc::io);

  // A gzip stream cut short: zlib notices the missing end.
  write_gz(dir / "whole.gz", idx_file(0x08, {4096}, std::vector<std::uint8_t>(4096, 7)));
  auto gz = io_test::read_bytes(dir / "whole.gz");
  gz.resize(gz.size() - 6);
  io_test::write_bytes(dir / "cut.gz", gz);
  auto cut = teeny::read_idx(dir / "cut.gz");
  REQUIRE_FALSE(cut);
  CHECK(contains(cut.error().message(), "cut.gz"));
}

TEST_CASE("parse_idx: arrays in memory, raw or gzipped, with read_idx's checks") {
  io_test::TempDir dir;
  const auto raw = idx_file(0x0B, {3}, big_endian<std::int16_t>({1, -2, 300}));
  write_gz(dir / "a.gz", raw);
  const auto gz = io_test::read_bytes(dir / "a.gz");
  for (std::span<const std::byte> bytes : {std::as_bytes(std::span(raw)), std::span<const std::byte>(gz)}) {
    auto a = teeny::parse_idx(bytes);
    REQUIRE(a);
    CHECK(a->shape == ConcreteShape{3});
    CHECK(values_of<std::int16_t>(a->data) == std::vector<std::int16_t>{1, -2, 300});
  }

  // Members one after another read as one stream (as gzread does); anything else after is ignored.
  write_gz(dir / "b.gz", {3, 4});
  const auto first = idx_file(0x08, {4}, {1, 2});
  write_gz(dir / "c.gz", first);
  auto two = io_test::read_bytes(dir / "c.gz");
  const auto second = io_test::read_bytes(dir / "b.gz");
  two.insert(two.end(), second.begin(), second.end());
  two.push_back(std::byte{0});
  auto joined = teeny::parse_idx(two, "two.gz");
  REQUIRE(joined);
  CHECK(values_of<std::uint8_t>(joined->data) == std::vector<std::uint8_t>{1, 2, 3, 4});

  auto cut = teeny::parse_idx(std::span(gz).first(gz.size() - 6), "cut.gz");
  REQUIRE_FALSE(cut);
  CHECK(cut.error().code() == Errc::io);
  CHECK_MESSAGE(contains(cut.error().message(), "IDX file 'cut.gz': corrupt or truncated gzip data"),
                cut.error().message());

  auto bad = teeny::parse_idx(std::as_bytes(std::span(raw)).first(5));
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message() == "IDX file '<memory>': truncated: 5 bytes, fewer than the 8-byte header of 1 dims");
}

TEST_CASE("load_fashion_mnist: scales pixels to [0, 1] and widens labels, from raw or gzipped files") {
  io_test::TempDir dir;
  std::vector<std::uint8_t> pixels(3 * 28 * 28);
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<std::uint8_t>(i * 7);
  pixels[0] = 255;
  pixels[1] = 51;
  io_test::write_bytes(dir / "t10k-images-idx3-ubyte", idx_file(0x08, {3, 28, 28}, pixels));
  write_gz(dir / "t10k-labels-idx1-ubyte.gz", idx_file(0x08, {3}, {9, 0, 4}));

  auto test = teeny::load_fashion_mnist(dir.path(), teeny::DatasetSplit::test);
  REQUIRE_MESSAGE(test, (test ? "" : test.error().to_string()));
  CHECK(test->size() == 3);
  CHECK(test->images.dtype() == DType::f32);
  CHECK(test->images.shape() == ConcreteShape{3, 1, 28, 28});
  CHECK(test->labels.dtype() == DType::i64);
  CHECK(test->labels.shape() == ConcreteShape{3});
  CHECK(values_of<std::int64_t>(test->labels) == std::vector<std::int64_t>{9, 0, 4});
  const auto images = values_of<float>(test->images);
  CHECK(images[0] == 1.0f);
  CHECK(images[1] == 51.0f / 255.0f);
  for (std::size_t i = 0; i < pixels.size(); ++i) REQUIRE(images[i] == static_cast<float>(pixels[i]) / 255.0f);

  auto train = teeny::load_fashion_mnist(dir.path(), teeny::DatasetSplit::train);
  REQUIRE_FALSE(train);
  CHECK(train.error().code() == Errc::not_found);
  CHECK(contains(train.error().message(), "train-images-idx3-ubyte' nor '"));

  write_gz(dir / "train-images-idx3-ubyte.gz", idx_file(0x08, {2, 28, 28}, std::vector<std::uint8_t>(2 * 784)));
  io_test::write_bytes(dir / "train-labels-idx1-ubyte", idx_file(0x08, {3}, {1, 2, 3}));
  auto counts = teeny::load_fashion_mnist(dir.path(), teeny::DatasetSplit::train);
  REQUIRE_FALSE(counts);
  CHECK(counts.error().code() == Errc::shape_mismatch);
  CHECK(contains(counts.error().message(), "3 labels in '"));
  CHECK(contains(counts.error().message(), "' but 2 images in '"));

  io_test::write_bytes(dir / "train-labels-idx1-ubyte", idx_file(0x08, {2}, {1, 10}));
  auto label = teeny::load_fashion_mnist(dir.path(), teeny::DatasetSplit::train);
  REQUIRE_FALSE(label);
  CHECK(contains(label.error().message(), "label 1 in '"));
  CHECK(contains(label.error().message(), "is 10, not a class 0..9"));

  write_gz(dir / "train-images-idx3-ubyte.gz", idx_file(0x08, {2, 32, 32}, std::vector<std::uint8_t>(2 * 1024)));
  auto size = teeny::load_fashion_mnist(dir.path(), teeny::DatasetSplit::train);
  REQUIRE_FALSE(size);
  CHECK(contains(size.error().message(), "holds u8 [2, 32, 32], not u8 [N, 28, 28] images"));
}

TEST_CASE("load_fashion_mnist: the real test set, when installed") {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!std::filesystem::exists(dir + "/t10k-labels-idx1-ubyte.gz")) {
    MESSAGE("skipped: " << dir << " is not installed (Debian package dataset-fashion-mnist)");
    return;
  }
  auto test = teeny::load_fashion_mnist(dir, teeny::DatasetSplit::test);
  REQUIRE_MESSAGE(test, (test ? "" : test.error().to_string()));
  CHECK(test->size() == 10000);
  CHECK(test->images.shape() == ConcreteShape{10000, 1, 28, 28});
  const auto labels = values_of<std::int64_t>(test->labels);
  std::array<int, 10> per_class{};
  for (std::int64_t l : labels) {
    REQUIRE((l >= 0 && l <= 9));
    ++per_class[static_cast<std::size_t>(l)];
  }
  for (int n : per_class) CHECK(n == 1000);
  CHECK(std::vector<std::int64_t>(labels.begin(), labels.begin() + 5) ==
        std::vector<std::int64_t>{9, 2, 1, 1, 6});  // ankle boot, pullover, trouser, trouser, shirt
  float lo = 1.0f;
  float hi = 0.0f;
  for (float p : values_of<float>(test->images)) {
    lo = p < lo ? p : lo;
    hi = p > hi ? p : hi;
  }
  CHECK(lo == 0.0f);
  CHECK(hi == 1.0f);
}
