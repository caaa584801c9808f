// safetensors: the Python-written reference fixture, hand-made malformed files, a fuzz pass, the
// writer's round trip and its byte-for-byte agreement with the safetensors library's layout.
#include <doctest/doctest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "io/io_test_support.hpp"

import teeny.core;
import teeny.io;

using teeny::bf16;
using teeny::ConcreteShape;
using teeny::DType;
using teeny::Errc;
using teeny::f16;
using teeny::SafetensorsFile;
using teeny::Tensor;
using teeny::TensorRef;

namespace {

using io_test::contains;
using io_test::values_of;

/// Parses an in-memory image and returns the error message ("" when it opened).
std::string parse_error(std::string_view header, std::size_t data_size) {
  auto f = SafetensorsFile::parse(io_test::safetensors_image(header, data_size), "bad.safetensors");
  return f ? std::string() : f.error().message();
}

}  // namespace

TEST_CASE("safetensors: reads the Python-written reference file") {
  const std::string path = io_test::fixture("reference.safetensors");
  auto file = SafetensorsFile::open(path);
  REQUIRE_MESSAGE(file, (file ? "" : file.error().to_string()));
  CHECK(file->path() == path);
  CHECK(file->header_size() % 8 == 0);
  CHECK(file->metadata() == std::map<std::string, std::string>{{"format", "pt"}, {"source", "make_io_fixtures.py"}});

  std::vector<std::string> names;
  for (const auto& e : file->entries()) names.push_back(e.name);
  CHECK(names == std::vector<std::string>{"mask", "fc1.weight", "fc1.bias", "scale", "bn1.num_batches_tracked", "emb",
                                          "out.weight", "empty"});

  const auto* w = file->find("fc1.weight");
  REQUIRE(w != nullptr);
  CHECK(w->dtype == DType::f32);
  CHECK(w->shape == ConcreteShape{2, 3});
  CHECK(w->offset == 3);
  CHECK(w->data.size() == 24);
  CHECK(file->find("missing") == nullptr);
  CHECK(file->find("__metadata__") == nullptr);

  auto weight = file->read(*w, DType::f32);
  REQUIRE(weight);
  CHECK(weight->shape() == ConcreteShape{2, 3});
  CHECK(values_of<float>(*weight) == std::vector<float>{0.5f, -1.25f, 3.0f, 0.001f, -0.0f, 65504.0f});

  auto bias = file->read("fc1.bias");  // its own dtype
  REQUIRE(bias);
  CHECK(bias->dtype() == DType::f16);
  auto bias32 = file->read("fc1.bias", DType::f32);
  REQUIRE(bias32);
  CHECK(values_of<float>(*bias32) == std::vector<float>{1.0f, -2.5f, 0.0999755859375f});

  auto emb = file->read("emb", DType::f32);
  REQUIRE(emb);
  CHECK(emb->shape() == ConcreteShape{2, 2});
  CHECK(values_of<float>(*emb) == std::vector<float>{1.0f, -0.5f, 3.140625f, 256.0f});

  auto scale = file->read("scale", DType::f32);
  REQUIRE(scale);
  CHECK(values_of<float>(*scale) == std::vector<float>{0.1f, -2.0f});
  auto scale64 = file->read("scale");
  REQUIRE(scale64);
  CHECK(values_of<double>(*scale64) == std::vector<double>{0.1, -2.0});

  auto steps = file->read("bn1.num_batches_tracked");
  REQUIRE(steps);
  CHECK(steps->shape().rank() == 0);
  CHECK(values_of<std::int64_t>(*steps) == std::vector<std::int64_t>{1234567890123});
  auto steps_f64 = file->read("bn1.num_batches_tracked", DType::f64);
  REQUIRE(steps_f64);
  CHECK(values_of<double>(*steps_f64) == std::vector<double>{1234567890123.0});

  auto mask = file->read("mask");
  REQUIRE(mask);
  CHECK(values_of<bool>(*mask) == std::vector<bool>{true, false, true});
  auto mask_f32 = file->read("mask", DType::f32);
  REQUIRE(mask_f32);
  CHECK(values_of<float>(*mask_f32) == std::vector<float>{1.0f, 0.0f, 1.0f});

  auto empty = file->read("empty", DType::f16);
  REQUIRE(empty);
  CHECK(empty->shape() == ConcreteShape{0, 4});
  CHECK(empty->numel() == 0);
}

TEST_CASE("safetensors: zero-copy views need the same dtype and aligned data") {
  auto file = SafetensorsFile::open(io_test::fixture("reference.safetensors"));
  REQUIRE(file);

  const auto* out = file->find("out.weight");
  REQUIRE(out != nullptr);
  auto view = file->view<float>(*out);
  REQUIRE(view);
  CHECK(static_cast<const void*>(view->data) == static_cast<const void*>(out->data.data()));  // no copy
  CHECK(view->shape == ConcreteShape{1, 2});
  CHECK((*view)(0, 0) == 2.0f);
  CHECK((*view)(0, 1) == -4.0f);

  auto steps = file->view<std::int64_t>("bn1.num_batches_tracked");
  REQUIRE(steps);
  CHECK(steps->data[0] == 1234567890123);
  auto mask = file->view<bool>("mask");
  REQUIRE(mask);
  CHECK(mask->span().size() == 3);
  CHECK(mask->data[2]);

  auto unaligned = file->view<float>("fc1.weight");  // offset 3 in the data buffer
  REQUIRE_FALSE(unaligned);
  CHECK(unaligned.error().code() == Errc::unsupported);
  CHECK(contains(unaligned.error().message(), "tensor 'fc1.weight': its data (offset 3) is not aligned to 4 bytes"));

  auto wrong = file->view<double>("out.weight");
  REQUIRE_FALSE(wrong);
  CHECK(wrong.error().code() == Errc::dtype_mismatch);
  CHECK(contains(wrong.error().message(), "tensor 'out.weight': is f32 but was viewed as f64"));

  auto missing = file->view<float>("nope");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code() == Errc::not_found);
  CHECK(contains(missing.error().message(), "has no tensor 'nope'"));
}

TEST_CASE("safetensors: read converts only where the values survive") {
  auto file = SafetensorsFile::open(io_test::fixture("reference.safetensors"));
  REQUIRE(file);

  auto truncating = file->read("scale", DType::i32);
  REQUIRE_FALSE(truncating);
  CHECK(truncating.error().code() == Errc::dtype_mismatch);
  CHECK(contains(truncating.error().message(), "tensor 'scale' (f64 [2]): cannot be read as i32"));

  auto narrow = file->read("bn1.num_batches_tracked", DType::i32);
  REQUIRE_FALSE(narrow);
  CHECK(narrow.error().code() == Errc::out_of_range);
  CHECK(contains(narrow.error().message(), "element 0 is 1234567890123, which does not fit in i32"));

  auto mask_u8 = file->read("mask", DType::u8);
  REQUIRE(mask_u8);
  CHECK(values_of<std::uint8_t>(*mask_u8) == std::vector<std::uint8_t>{1, 0, 1});

  auto missing = file->read("nope", DType::f32);
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code() == Errc::not_found);
}

TEST_CASE("safetensors: a missing path, a directory and an empty file are errors naming the path") {
  io_test::TempDir dir;
  auto missing = SafetensorsFile::open(dir / "nope.safetensors");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code() == Errc::not_found);
  CHECK(contains(missing.error().message(), "nope.safetensors"));

  auto directory = SafetensorsFile::open(dir.path());
  REQUIRE_FALSE(directory);
  CHECK(directory.error().code() == Errc::io);
  CHECK(contains(directory.error().message(), "'" + dir.path() + "' is a directory"));

  io_test::write_bytes(dir / "empty.safetensors", std::span<const std::byte>{});
  auto empty = SafetensorsFile::open(dir / "empty.safetensors");
  REQUIRE_FALSE(empty);
  CHECK(empty.error().code() == Errc::parse);
  CHECK(contains(empty.error().message(), "safetensors file '" + (dir / "empty.safetensors") + "': the file is empty"));

  const auto junk = io_test::safetensors_image("{\"a\": 1}", 0);
  io_test::write_bytes(dir / "junk.safetensors", junk);
  auto bad = SafetensorsFile::open(dir / "junk.safetensors");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code() == Errc::parse);
  CHECK(bad.error().message() ==
        "safetensors file '" + (dir / "junk.safetensors") +
            "': tensor 'a': expected an object with dtype, shape and data_offsets, got a number");
}

TEST_CASE("safetensors: truncated files and impossible header lengths") {
  // 8 zero bytes: a header of length 0, which is not a JSON object.
  CHECK(contains(parse_error("", 0), "bad header JSON at byte 0: expected a value, got end of input"));
  auto short_file = SafetensorsFile::parse(std::vector<std::byte>(5), "short.safetensors");
  REQUIRE_FALSE(short_file);
  CHECK(short_file.error().message() ==
        "safetensors file 'short.safetensors': truncated: the file has 5 bytes, fewer than the 8-byte header length "
        "that starts it");

  auto image = io_test::safetensors_image("{}", 0);
  image[0] = std::byte{0xff};
  image[7] = std::byte{0x7f};  // a length of about 2^63
  auto huge = SafetensorsFile::parse(image, "huge.safetensors");
  REQUIRE_FALSE(huge);
  CHECK(contains(huge.error().message(), "bytes but the whole file has 10 (not a safetensors file?)"));

  image = io_test::safetensors_image("{}", 0);
  image[0] = std::byte{9};  // 9 > 10 - 8 but <= 10
  auto truncated = SafetensorsFile::parse(image, "t.safetensors");
  REQUIRE_FALSE(truncated);
  CHECK(truncated.error().message() ==
        "safetensors file 't.safetensors': truncated: the header length is 9 bytes but only 2 follow the length field");

  auto none = SafetensorsFile::parse(io_test::safetensors_image("{}", 0), "none.safetensors");
  REQUIRE(none);
  CHECK(none->entries().empty());
}

TEST_CASE("safetensors: malformed headers are parse errors naming the file and the key") {
  struct Case {
    std::string_view header;
    std::size_t data;
    std::string_view expected;
  };
  const Case cases[] = {
      {R"({"a" 1})", 0, "bad header JSON at byte 5: expected ':'"},
      {R"({"a": {"dtype": "F32",})", 0, "bad header JSON at byte 22: expected a string key, got '}'"},
      {R"({"a": [1)", 0, "bad header JSON at byte 8: expected ',' or ']'"},
      {R"({"a": [1, 2,]})", 0, "bad header JSON at byte 12: expected a value, got ']'"},
      {R"({"a": tru})", 0, "bad header JSON at byte 6: expected 'true'"},
      {R"({"a": 01})", 0, "bad header JSON at byte 7: a number may not have a leading zero"},
      {R"({"a": "x\q"})", 0, "bad header JSON at byte 9: invalid escape '\\q'"},
      {R"({"a": "\ud800"})", 0, "bad header JSON at byte 7: lone leading surrogate in \\u escape"},
      {"{\"a\": \"\x01\"}", 0, "bad header JSON at byte 7: control character byte 0x01 in a string"},
      {"{\"a\xff\": 1}", 0, "bad header JSON at byte 3: invalid UTF-8 in a string"},
      {R"({} x)", 0, "bad header JSON at byte 3: unexpected 'x' after the value"},
      {R"({"a": 1, "a": 2})", 0, "bad header JSON at byte 9: duplicate key \"a\""},
      {R"([1, 2])", 0, "the header must be a JSON object, got an array"},
      {R"({"a": {"dtype": "F8_E4M3", "shape": [1], "data_offsets": [0, 1]}})", 1,
       "tensor 'a': unknown dtype 'F8_E4M3' (supported: BOOL, I8, I16, I32, I64, U8, U16, U32, U64, F16, BF16, F32, "
       "F64)"},
      {R"({"a": {"dtype": "f32", "shape": [1], "data_offsets": [0, 4]}})", 4, "tensor 'a': unknown dtype 'f32'"},
      {R"({"a": {"dtype": 3, "shape": [1], "data_offsets": [0, 4]}})", 4, "tensor 'a': 'dtype' must be a string"},
      {R"({"a": {"shape": [1], "data_offsets": [0, 4]}})", 4, "tensor 'a': has no 'dtype'"},
      {R"({"a": {"dtype": "F32", "data_offsets": [0, 4]}})", 4, "tensor 'a': has no 'shape'"},
      {R"({"a": {"dtype": "F32", "shape": [1]}})", 4, "tensor 'a': has no 'data_offsets'"},
      {R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], "x": 1}})", 4,
       "tensor 'a': unknown field 'x' (expected dtype, shape and data_offsets)"},
      {R"({"a": {"dtype": "F32", "shape": 1, "data_offsets": [0, 4]}})", 4, "'shape' must be an array, got a number"},
      {R"({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4,
       "tensor 'a': shape dim 0 is not a non-negative integer"},
      {R"({"a": {"dtype": "F32", "shape": [2, 0.5], "data_offsets": [0, 4]}})", 4,
       "tensor 'a': shape dim 1 is not a non-negative integer"},
      {R"({"a": {"dtype": "F32", "shape": [1e2], "data_offsets": [0, 400]}})", 400,
       "tensor 'a': shape dim 0 is not a non-negative integer"},
      {R"({"a": {"dtype": "F32", "shape": [1, 1, 1, 1, 1, 1, 1, 1, 1], "data_offsets": [0, 4]}})", 4,
       "tensor 'a': shape has 9 dims; at most 8 are supported"},
      {R"({"a": {"dtype": "F32", "shape": [4294967296, 4294967296, 4294967296], "data_offsets": [0, 4]}})", 4,
       "tensor 'a': shape [4294967296, 4294967296, 4294967296] has more than 2^56 elements"},
      // The twin of what tests/fuzz/fuzz_idx found: no elements, but numel() overflowed before the 0.
      {R"({"a": {"dtype": "BOOL", "shape": [4611686018427387904, 2, 0], "data_offsets": [0, 0]}})", 0,
       "tensor 'a': shape [4611686018427387904, 2, 0] is empty, but its other dims multiply past 2^56"},
      {R"({"a": {"dtype": "F32", "shape": [99999999999999999999], "data_offsets": [0, 4]}})", 4,
       "tensor 'a': shape dim 0 is not a non-negative integer"},
      {R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", 4,
       "tensor 'a': 'data_offsets' must be two ordered non-negative integers [begin, end]"},
      {R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}})", 4, "'data_offsets' must be two ordered"},
      {R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": ["0", "4"]}})", 4, "'data_offsets' must be two ordered"},
      {R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})", 4, "'data_offsets' must be two ordered"},
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}})", 8,
       "tensor 'a': data_offsets [0, 4] hold 4 bytes, but f32 [2] needs 2 x 4 = 8"},
      {R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", 8,
       "tensor 'a': data_offsets [0, 16] end past the data buffer (8 bytes after the header): truncated file?"},
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "I32", "shape": [2],
           "data_offsets": [4, 12]}})",
       12, "tensors 'a' [0, 8) and 'b' [4, 12) overlap"},
      {R"({"__metadata__": [1]})", 0, "'__metadata__' must be an object of strings, got an array"},
      {R"({"__metadata__": {"k": 1}})", 0, "'__metadata__' value 'k' must be a string, got a number"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.header);
    const std::string message = parse_error(c.header, c.data);
    CHECK(contains(message, "safetensors file 'bad.safetensors': "));
    CHECK_MESSAGE(contains(message, c.expected), message);
  }

  std::string deep(100, '[');
  CHECK(contains(parse_error(deep, 0), "nested deeper than 64 levels"));

  auto code = SafetensorsFile::parse(io_test::safetensors_image("{", 0), "x");
  REQUIRE_FALSE(code);
  CHECK(code.error().code() == Errc::parse);
}

TEST_CASE("safetensors: gaps, empty tensors, escapes and metadata anywhere are accepted") {
  auto f = SafetensorsFile::parse(
      io_test::safetensors_image(R"( {"b": {"dtype": "U8", "shape": [4], "data_offsets": [8, 12]},
        "__metadata__": {"k": "v\n\u00e9"},
        "z": {"dtype": "F32", "shape": [0], "data_offsets": [2, 2]},
        "a\"\\\/\ud83d\ude00": {"dtype": "I16", "shape": [2], "data_offsets": [0, 4]}}  )",
                                 16),
      "ok.safetensors");
  REQUIRE_MESSAGE(f, (f ? "" : f.error().to_string()));
  REQUIRE(f->entries().size() == 3);
  CHECK(f->entries()[0].name == "a\"\\/\xf0\x9f\x98\x80");  // file order: offsets 0, 2, 8
  CHECK(f->entries()[1].name == "z");
  CHECK(f->entries()[2].name == "b");
  CHECK(f->metadata().at("k") == "v\n\xc3\xa9");
  auto b = f->read("b");
  REQUIRE(b);
  CHECK(values_of<std::uint8_t>(*b) == std::vector<std::uint8_t>{8, 9, 10, 11});
  auto a = f->read(f->entries()[0], DType::i32);
  REQUIRE(a);
  CHECK(values_of<std::int32_t>(*a) == std::vector<std::int32_t>{0x0100, 0x0302});  // little-endian bytes 0 1 2 3
}

TEST_CASE("safetensors: every truncation and random corruption gives an error or a valid file, never a crash") {
  const auto reference = io_test::read_bytes(io_test::fixture("reference.safetensors"));
  REQUIRE(reference.size() > 100);

  for (std::size_t n = 0; n < reference.size(); ++n) {
    CAPTURE(n);
    auto f = SafetensorsFile::parse(std::span(reference).first(n), "cut");
    CHECK_FALSE(f);  // the last tensor ends at the end of the file, so every cut loses something
  }

  // A file that opens must be fully usable: entries inside the data, sizes that match, readable.
  auto check_valid = [](const SafetensorsFile& f, std::size_t file_size) {
    for (const auto& e : f.entries()) {
      CHECK(e.data.size() == static_cast<std::size_t>(e.shape.numel()) * teeny::size_of(e.dtype));
      CHECK(8 + f.header_size() + e.offset + e.data.size() <= file_size);
      auto t = f.read(e, e.dtype);
      CHECK(t);
      auto as_f64 = f.read(e, DType::f64);
      CHECK(as_f64);
    }
  };

  std::mt19937 rng(20240611);
  int opened = 0;
  int refused = 0;
  std::size_t header_end = 8;  // 8 + the header length N
  for (std::size_t i = 0; i < 8; ++i) header_end += std::to_integer<std::size_t>(reference[i]) << (8 * i);
  for (int round = 0; round < 400; ++round) {
    auto bytes = reference;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < flips; ++i) {
      // Most corruptions hit the header, where parsing happens; some the length, some the data.
      const std::size_t at = round % 4 == 0   ? rng() % bytes.size()
                             : round % 4 == 1 ? rng() % 8
                                              : 8 + rng() % (header_end - 8);
      const auto value =
          round % 8 < 4 ? static_cast<std::byte>(rng()) : static_cast<std::byte>("{}[]\",:0123456789-e."[rng() % 20]);
      bytes[at] = value;
    }
    auto f = SafetensorsFile::parse(bytes, "fuzz");
    if (f) {
      ++opened;
      check_valid(*f, bytes.size());
    } else {
      ++refused;
      CHECK(!f.error().message().empty());
      CHECK((f.error().code() == Errc::parse || f.error().code() == Errc::out_of_memory));
    }
  }
  MESSAGE("fuzz: ", opened, " corrupted files opened (harmless changes), ", refused, " refused");
  CHECK(refused > 200);
}

TEST_CASE("safetensors: save then open round-trips every dtype, shape and the metadata") {
  io_test::TempDir dir;
  const std::vector<float> w = {1.5f, -2.0f, 3.25f, 0.0f, 1e-8f, -7.0f};
  const std::vector<f16> h = {f16(0.5f), f16(-65504.0f), f16(1e-7f)};
  const std::vector<bf16> b = {bf16(1.0f), bf16(-3.0f)};
  const std::vector<double> d = {0.1, 1e300};
  const std::vector<std::int64_t> steps = {42};
  const std::vector<std::uint8_t> flags = {1, 0, 0, 1};  // BOOL
  const std::vector<std::int8_t> small = {-128, 127, 0};
  const std::vector<TensorRef> refs = {
      {"layer.weight", DType::f32, {2, 3}, io_test::bytes_of(w)},
      {"layer.bias", DType::f16, {3}, io_test::bytes_of(h)},
      {"emb", DType::bf16, {1, 2}, io_test::bytes_of(b)},
      {"scale", DType::f64, {2}, io_test::bytes_of(d)},
      {"bn.num_batches_tracked", DType::i64, {}, io_test::bytes_of(steps)},
      {"mask", DType::boolean, {2, 2}, io_test::bytes_of(flags)},
      {"q", DType::i8, {3}, io_test::bytes_of(small)},
      {"nothing", DType::f32, {0, 5}, {}},
  };
  const std::map<std::string, std::string> meta = {{"format", "pt"}, {"note", "quote \" and \\ and \n"}};
  const std::string path = dir / "model.safetensors";
  auto saved = teeny::save_safetensors(path, refs, meta);
  REQUIRE_MESSAGE(saved, (saved ? "" : saved.error().to_string()));
  CHECK_FALSE(io_test::fs::exists(path + ".partial"));

  auto file = SafetensorsFile::open(path);
  REQUIRE_MESSAGE(file, (file ? "" : file.error().to_string()));
  CHECK(file->header_size() % 8 == 0);
  CHECK(file->metadata() == meta);
  REQUIRE(file->entries().size() == refs.size());
  for (const TensorRef& r : refs) {
    CAPTURE(r.name);
    const auto* e = file->find(r.name);
    REQUIRE(e != nullptr);
    CHECK(e->dtype == r.dtype);
    CHECK(e->shape == r.shape);
    REQUIRE(e->data.size() == r.data.size());
    CHECK(std::equal(e->data.begin(), e->data.end(), r.data.begin()));
    CHECK(reinterpret_cast<std::uintptr_t>(e->data.data()) % teeny::size_of(e->dtype) == 0);  // no gaps, yet aligned
  }
  auto view = file->view<float>("layer.weight");
  REQUIRE(view);
  CHECK((*view)(1, 2) == -7.0f);

  // A Tensor saves through TensorRef::of, and saving over an existing file replaces it.
  auto t = Tensor::from<float>({1, 2, 3, 4}, {2, 2});
  REQUIRE(t);
  const TensorRef one[] = {TensorRef::of("t", *t)};
  REQUIRE(teeny::save_safetensors(path, one));
  auto again = SafetensorsFile::open(path);
  REQUIRE(again);
  CHECK(again->metadata().empty());
  auto back = again->read("t");
  REQUIRE(back);
  CHECK(values_of<float>(*back) == std::vector<float>{1, 2, 3, 4});
}

TEST_CASE("safetensors: the writer's bytes equal the safetensors library's layout") {
  // tools/make_io_fixtures.py lays out canonical.safetensors as the Python library does.
  const auto expected = io_test::read_bytes(io_test::fixture("canonical.safetensors"));
  REQUIRE_FALSE(expected.empty());
  const std::vector<float> b = {1.0f, 2.0f};
  const std::vector<f16> a = {f16(0.5f), f16(-1.0f), f16(2.0f)};
  const std::vector<std::int64_t> c = {-7};
  const std::vector<std::uint8_t> d = {1, 2, 3};
  const std::vector<float> e = {-3.0f, 4.5f};
  const std::vector<TensorRef> refs = {
      {"b", DType::f32, {2}, io_test::bytes_of(b)},    {"a", DType::f16, {3}, io_test::bytes_of(a)},
      {"c", DType::i64, {1}, io_test::bytes_of(c)},    {"d", DType::u8, {3}, io_test::bytes_of(d)},
      {"e", DType::f32, {2, 1}, io_test::bytes_of(e)},
  };
  io_test::TempDir dir;
  REQUIRE(teeny::save_safetensors(dir / "c.safetensors", refs, {{"format", "pt"}}));
  CHECK(io_test::read_bytes(dir / "c.safetensors") == expected);
}

TEST_CASE("safetensors: save refuses bad input and reports where it cannot write") {
  io_test::TempDir dir;
  const std::vector<float> two = {1, 2};
  const TensorRef duplicate[] = {{"x", DType::f32, {2}, io_test::bytes_of(two)},
                                 {"x", DType::i32, {2}, io_test::bytes_of(two)}};
  auto dup = teeny::save_safetensors(dir / "d.safetensors", duplicate);
  REQUIRE_FALSE(dup);
  CHECK(dup.error().code() == Errc::duplicate);
  CHECK(contains(dup.error().message(), "two tensors are named 'x'"));

  const TensorRef short_data[] = {{"x", DType::f32, {3}, io_test::bytes_of(two)}};
  auto size = teeny::save_safetensors(dir / "s.safetensors", short_data);
  REQUIRE_FALSE(size);
  CHECK(size.error().code() == Errc::invalid_argument);
  CHECK(contains(size.error().message(), "tensor 'x' (f32 [3]) needs 12 bytes of data, got 8"));

  const TensorRef reserved[] = {{"__metadata__", DType::f32, {2}, io_test::bytes_of(two)}};
  CHECK_FALSE(teeny::save_safetensors(dir / "r.safetensors", reserved));

  const TensorRef fine[] = {{"x", DType::f32, {2}, io_test::bytes_of(two)}};
  auto nowhere = teeny::save_safetensors(dir / "no/such/dir/x.safetensors", fine);
  REQUIRE_FALSE(nowhere);
  CHECK(nowhere.error().code() == Errc::io);
  CHECK(contains(nowhere.error().message(), "no/such/dir/x.safetensors"));
  CHECK_FALSE(io_test::fs::exists(dir / "d.safetensors"));
}
