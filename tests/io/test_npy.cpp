// .npy: files written by NumPy's own np.save (tools/make_io_fixtures.py) read back to their known
// values; save_npy reproducing NumPy's bytes; malformed headers and data refused by name.
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "io/io_test_support.hpp"

import teeny.core;
import teeny.io;

using teeny::ConcreteShape;
using teeny::DType;
using teeny::Errc;
using teeny::f16;
using teeny::Tensor;
using teeny::TensorRef;

namespace {

std::string npy(std::string_view name) { return io_test::fixture(std::string("npy/") + std::string(name) + ".npy"); }

using io_test::contains;
using io_test::values_of;

// An in-memory .npy image: version 1.0, `header` as given (not padded), then `data`.
std::vector<std::byte> image(std::string_view header, std::size_t data_bytes) {
  std::vector<std::byte> out;
  for (char c : std::string_view("\x93NUMPY\x01\x00", 8)) out.push_back(static_cast<std::byte>(c));
  out.push_back(static_cast<std::byte>(header.size() & 0xff));
  out.push_back(static_cast<std::byte>(header.size() >> 8));
  for (char c : header) out.push_back(static_cast<std::byte>(c));
  out.resize(out.size() + data_bytes);
  return out;
}

std::string parse_error(std::string_view header, std::size_t data_bytes) {
  auto t = teeny::parse_npy(image(header, data_bytes), "bad.npy");
  return t ? std::string() : t.error().message();
}

}  // namespace

TEST_CASE("npy: reads NumPy-written files of each dtype to their values") {
  auto f32 = teeny::read_npy(npy("f32_2x3"));
  REQUIRE(f32);
  CHECK(f32->dtype() == DType::f32);
  CHECK(f32->shape() == ConcreteShape{2, 3});
  CHECK(values_of<float>(*f32) == std::vector<float>{0.5F, -1.25F, 3.0F, 0.001F, -0.0F, 65504.0F});

  auto f16s = teeny::read_npy(npy("f16_3"));
  REQUIRE(f16s);
  CHECK(f16s->dtype() == DType::f16);
  const auto halves = values_of<f16>(*f16s);
  REQUIRE(halves.size() == 3);
  CHECK(static_cast<float>(halves[0]) == 1.0F);
  CHECK(static_cast<float>(halves[1]) == -2.5F);
  CHECK(static_cast<float>(halves[2]) == doctest::Approx(0.099975586F));

  auto flags = teeny::read_npy(npy("bool_4"));
  REQUIRE(flags);
  CHECK(flags->dtype() == DType::boolean);
  CHECK(values_of<bool>(*flags) == std::vector<bool>{true, false, false, true});

  // Any nonzero byte is True (as NumPy reads it), stored as a valid bool.
  auto odd = image("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", 3);
  odd[odd.size() - 3] = std::byte{2};
  odd[odd.size() - 1] = std::byte{255};
  auto bools = teeny::parse_npy(odd);
  REQUIRE(bools);
  const auto* raw = reinterpret_cast<const std::uint8_t*>(bools->data());
  CHECK(std::vector<std::uint8_t>(raw, raw + 3) == std::vector<std::uint8_t>{1, 0, 1});

  auto scalar = teeny::read_npy(npy("i64_scalar"));
  REQUIRE(scalar);
  CHECK(scalar->shape().rank() == 0);
  CHECK(values_of<std::int64_t>(*scalar) == std::vector<std::int64_t>{-7});

  auto empty = teeny::read_npy(npy("u8_empty_0x3"));
  REQUIRE(empty);
  CHECK(empty->dtype() == DType::u8);
  CHECK(empty->shape() == ConcreteShape{0, 3});

  auto v2 = teeny::read_npy(npy("f32_v2"));  // format 2.0: a 4-byte header length
  REQUIRE(v2);
  CHECK(values_of<float>(*v2) == std::vector<float>{1.5F, -2.0F});
}

TEST_CASE("npy: big-endian and Fortran-order files come back native and in C order") {
  auto big = teeny::read_npy(npy("i32_big_endian"));
  REQUIRE(big);
  CHECK(values_of<std::int32_t>(*big) == std::vector<std::int32_t>{1, -2, 70000});

  auto f2 = teeny::read_npy(npy("f64_fortran_2x3"));  // np.arange(6).reshape(2, 3), column-major
  REQUIRE(f2);
  CHECK(f2->shape() == ConcreteShape{2, 3});
  CHECK(values_of<double>(*f2) == std::vector<double>{0, 1, 2, 3, 4, 5});

  auto f3 = teeny::read_npy(npy("i16_fortran_2x3x4"));  // np.arange(24).reshape(2, 3, 4)
  REQUIRE(f3);
  CHECK(f3->shape() == ConcreteShape{2, 3, 4});
  std::vector<std::int16_t> arange(24);
  for (std::size_t i = 0; i < arange.size(); ++i) arange[i] = static_cast<std::int16_t>(i);
  CHECK(values_of<std::int16_t>(*f3) == arange);
}

TEST_CASE("npy: save_npy writes NumPy's bytes, and what it writes reads back") {
  io_test::TempDir dir;
  for (const char* name : {"f32_2x3", "f16_3", "bool_4", "i64_scalar", "u8_empty_0x3"}) {
    CAPTURE(name);
    auto t = teeny::read_npy(npy(name));
    REQUIRE(t);
    const std::string out = dir / (std::string(name) + ".npy");
    REQUIRE(teeny::save_npy(out, TensorRef::of("t", *t)));
    CHECK(io_test::read_bytes(out) == io_test::read_bytes(npy(name)));
  }
  // Shapes of every rank up to 8, round trip.
  std::vector<float> values(2 * 3 * 1 * 2 * 1 * 1 * 2 * 1);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.25F - 3.0F;
  const ConcreteShape shape{2, 3, 1, 2, 1, 1, 2, 1};
  const std::string path = dir / "rank8.npy";
  REQUIRE(teeny::save_npy(path, TensorRef::of<float>("x", values, shape)));
  auto back = teeny::read_npy(path);
  REQUIRE(back);
  CHECK(back->shape() == shape);
  CHECK(values_of<float>(*back) == values);
}

TEST_CASE("npy: save_npy refuses what NumPy cannot hold and bytes that do not fill the shape") {
  io_test::TempDir dir;
  const std::vector<std::uint16_t> bits{0x3f80};
  TensorRef bf{"w", DType::bf16, ConcreteShape{1}, std::as_bytes(std::span(bits))};
  auto saved = teeny::save_npy(dir / "w.npy", bf);
  REQUIRE_FALSE(saved);
  CHECK(saved.error().code() == Errc::unsupported);
  CHECK(contains(saved.error().message(), "bf16"));
  CHECK(contains(saved.error().message(), "w.npy"));
  CHECK_FALSE(std::filesystem::exists(dir / "w.npy"));

  const std::vector<float> three{1, 2, 3};
  auto short_data = teeny::save_npy(dir / "s.npy", TensorRef::of<float>("s", three, {2, 2}));
  REQUIRE_FALSE(short_data);
  CHECK(contains(short_data.error().message(), "needs 16 bytes"));

  auto no_dir = teeny::save_npy(dir / "missing/s.npy", TensorRef::of<float>("s", three, {3}));
  REQUIRE_FALSE(no_dir);
  CHECK(no_dir.error().code() == Errc::io);
}

TEST_CASE("npy: malformed files are refused with what was wrong") {
  auto complex = teeny::read_npy(npy("c64_2"));
  REQUIRE_FALSE(complex);
  CHECK(complex.error().code() == Errc::unsupported);
  CHECK(contains(complex.error().message(), "'<c8'"));
  CHECK(contains(complex.error().message(), "c64_2.npy"));

  auto missing = teeny::read_npy(npy("no_such_file"));
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code() == Errc::not_found);

  CHECK(contains(teeny::parse_npy(std::vector<std::byte>(4)).error().message(), "not a .npy file"));

  const std::string ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  CHECK(parse_error(ok, 8).empty());
  CHECK(contains(parse_error(ok, 4), "truncated"));
  CHECK(contains(parse_error(ok, 12), "trailing bytes"));
  CHECK(contains(parse_error("{'descr': '<f4', 'shape': (2,), }", 8), "'fortran_order' is missing"));
  CHECK(contains(parse_error("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", 8),
                 "given twice"));
  CHECK(
      contains(parse_error("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}", 8), "structured dtype"));
  CHECK(contains(parse_error("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,)}", 8), "neither True"));
  CHECK(contains(parse_error("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}", 8), "non-negative"));
  CHECK(contains(parse_error("{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1)}", 4),
                 "more than 8 dims"));
  CHECK(contains(parse_error("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", 4),
                 "too large"));
  CHECK(
      contains(parse_error("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296)}", 4), "2^56"));
  CHECK(contains(parse_error("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}", 8),
                 "unknown key 'extra'"));
  CHECK(contains(parse_error("{'descr': '<f4", 8), "not closed"));
  auto long_header = image(ok, 8);
  long_header[8] = std::byte{0xff};  // header length past the end
  CHECK(contains(teeny::parse_npy(long_header).error().message(), "only"));
  auto version = image(ok, 8);
  version[6] = std::byte{9};
  CHECK(teeny::parse_npy(version).error().code() == Errc::unsupported);
}

TEST_CASE("npy: no input makes the reader crash") {
  const auto base = io_test::read_bytes(npy("i16_fortran_2x3x4"));
  std::mt19937 rng(7);
  for (int round = 0; round < 2000; ++round) {
    auto bytes = base;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) bytes[rng() % bytes.size()] = static_cast<std::byte>(rng());
    if (round % 3 == 0) bytes.resize(rng() % bytes.size());
    (void)teeny::parse_npy(bytes);  // an error or a tensor; under the sanitizers, never a fault
  }
}
