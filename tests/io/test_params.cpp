// load_parameters: strict loads report every problem at once and write nothing; non-strict loads
// what fits; floating dtypes convert, as do integers whose values fit.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
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
using teeny::LoadReport;
using teeny::ParamTarget;
using teeny::SafetensorsFile;
using teeny::TensorRef;

namespace {

using io_test::contains;
using Keys = std::vector<std::string>;

}  // namespace

TEST_CASE("load_parameters: strict load of the reference file converts floating dtypes") {
  auto file = SafetensorsFile::open(io_test::fixture("reference.safetensors"));
  REQUIRE(file);
  std::vector<float> w(6), bias(3), emb(4), scale(2), out(2), empty;
  std::vector<std::int64_t> steps(1);
  std::vector<std::uint8_t> mask(3, 7);  // bool storage
  const ParamTarget targets[] = {
      {"fc1.weight", DType::f32, {2, 3}, io_test::writable_bytes_of(w)},
      {"fc1.bias", DType::f32, {3}, io_test::writable_bytes_of(bias)},
      {"emb", DType::f32, {2, 2}, io_test::writable_bytes_of(emb)},
      {"scale", DType::f32, {2}, io_test::writable_bytes_of(scale)},
      {"out.weight", DType::f32, {1, 2}, io_test::writable_bytes_of(out)},
      {"bn1.num_batches_tracked", DType::i64, {}, io_test::writable_bytes_of(steps)},
      {"mask", DType::boolean, {3}, io_test::writable_bytes_of(mask)},
      {"empty", DType::f32, {0, 4}, io_test::writable_bytes_of(empty)},
  };
  auto report = teeny::load_parameters(*file, targets);
  REQUIRE_MESSAGE(report, (report ? "" : report.error().to_string()));
  CHECK(report->loaded ==
        Keys{"fc1.weight", "fc1.bias", "emb", "scale", "out.weight", "bn1.num_batches_tracked", "mask", "empty"});
  CHECK(report->converted == Keys{"fc1.bias", "emb", "scale"});
  CHECK(report->missing.empty());
  CHECK(report->skipped_unexpected.empty());
  CHECK(report->mismatched.empty());
  CHECK(teeny::to_string(*report) == "loaded 8 (3 converted), missing 0, unexpected 0, mismatched 0");

  CHECK(w == std::vector<float>{0.5f, -1.25f, 3.0f, 0.001f, -0.0f, 65504.0f});  // read from an unaligned offset
  CHECK(bias == std::vector<float>{1.0f, -2.5f, 0.0999755859375f});
  CHECK(emb == std::vector<float>{1.0f, -0.5f, 3.140625f, 256.0f});
  CHECK(scale == std::vector<float>{0.1f, -2.0f});
  CHECK(out == std::vector<float>{2.0f, -4.0f});
  CHECK(steps[0] == 1234567890123);
  CHECK(mask == std::vector<std::uint8_t>{1, 0, 1});
}

TEST_CASE("load_parameters: strict mode reports every problem in one error and writes nothing") {
  io_test::TempDir dir;
  std::vector<float> file_w(512 * 784, 1.0f), file_b(512, 2.0f), file_extra(3, 3.0f);
  const std::vector<std::int64_t> file_steps = {5};
  const std::vector<double> file_scale = {0.5};
  const TensorRef refs[] = {
      {"fc1.weight", DType::f32, {512, 784}, io_test::bytes_of(file_w)},
      {"fc1.bias", DType::f32, {512}, io_test::bytes_of(file_b)},
      {"extra.weight", DType::f32, {3}, io_test::bytes_of(file_extra)},
      {"bn1.num_batches_tracked", DType::i64, {}, io_test::bytes_of(file_steps)},
      {"scale", DType::f64, {1}, io_test::bytes_of(file_scale)},
  };
  REQUIRE(teeny::save_safetensors(dir / "w.safetensors", refs));
  auto file = SafetensorsFile::open(dir / "w.safetensors");
  REQUIRE(file);

  std::vector<float> w(512 * 785, -1.0f), b(512, -1.0f), fc2(10, -1.0f), steps(1, -1.0f), scale(1, -1.0f);
  const ParamTarget targets[] = {
      {"fc1.weight", DType::f32, {512, 785}, io_test::writable_bytes_of(w)},
      {"fc1.bias", DType::f32, {512}, io_test::writable_bytes_of(b)},  // fine on its own
      {"fc2.bias", DType::f32, {10}, io_test::writable_bytes_of(fc2)},
      {"bn1.num_batches_tracked", DType::f32, {}, io_test::writable_bytes_of(steps)},
      {"scale", DType::f32, {1}, io_test::writable_bytes_of(scale)},  // fine on its own (converted)
  };
  auto report = teeny::load_parameters(*file, targets);
  REQUIRE_FALSE(report);
  CHECK(report.error().code() == Errc::not_found);  // the first kind listed: missing
  const std::string& m = report.error().message();
  CHECK(m == "safetensors file '" + (dir / "w.safetensors") +
                 "': cannot load 5 parameters (4 problems):\n"
                 "  missing: 'fc2.bias' (the model expects f32 [10])\n"
                 "  unexpected: 'extra.weight' (f32 [3] in the file)\n"
                 "  'fc1.weight': file has [512, 784] but the model expects [512, 785]\n"
                 "  'bn1.num_batches_tracked': file has i64 but the model expects f32 (an i64 value is not converted "
                 "to the floating dtype f32)");
  for (float x : b) REQUIRE(x == -1.0f);  // nothing written, not even what would have loaded
  CHECK(scale[0] == -1.0f);
}

TEST_CASE("load_parameters: the error code follows the first kind of problem") {
  io_test::TempDir dir;
  const std::vector<float> v = {1, 2, 3, 4};
  const std::vector<std::int64_t> big = {1, 3000000000};
  const TensorRef refs[] = {{"a", DType::f32, {4}, io_test::bytes_of(v)},
                            {"n", DType::i64, {2}, io_test::bytes_of(big)}};
  REQUIRE(teeny::save_safetensors(dir / "f.safetensors", refs));
  auto file = SafetensorsFile::open(dir / "f.safetensors");
  REQUIRE(file);

  std::vector<float> a4(4), a6(6);
  std::vector<std::int32_t> n32(2);
  std::vector<std::int64_t> n64(2), a64(4);

  const ParamTarget shape[] = {{"a", DType::f32, {2, 3}, io_test::writable_bytes_of(a6)},
                               {"n", DType::i64, {2}, io_test::writable_bytes_of(n64)}};
  auto r1 = teeny::load_parameters(*file, shape);
  REQUIRE_FALSE(r1);
  CHECK(r1.error().code() == Errc::shape_mismatch);
  CHECK(contains(r1.error().message(), "'a': file has [4] but the model expects [2, 3]"));

  const ParamTarget dtype[] = {{"a", DType::i64, {4}, io_test::writable_bytes_of(a64)},
                               {"n", DType::i64, {2}, io_test::writable_bytes_of(n64)}};
  auto r2 = teeny::load_parameters(*file, dtype);
  REQUIRE_FALSE(r2);
  CHECK(r2.error().code() == Errc::dtype_mismatch);
  CHECK(contains(r2.error().message(),
                 "'a': file has f32 but the model expects i64 (a floating f32 value is not "
                 "converted to i64 (it would truncate))"));

  const ParamTarget narrow[] = {{"a", DType::f32, {4}, io_test::writable_bytes_of(a4)},
                                {"n", DType::i32, {2}, io_test::writable_bytes_of(n32)}};
  auto r3 = teeny::load_parameters(*file, narrow);
  REQUIRE_FALSE(r3);
  CHECK(r3.error().code() == Errc::out_of_range);
  CHECK(contains(r3.error().message(),
                 "'n': file has i64 and the model expects i32: element 1 is 3000000000, which does not fit in i32"));
  CHECK(a4 == std::vector<float>{0, 0, 0, 0});

  const ParamTarget unexpected_only[] = {{"a", DType::f32, {4}, io_test::writable_bytes_of(a4)}};
  auto r4 = teeny::load_parameters(*file, unexpected_only);
  REQUIRE_FALSE(r4);
  CHECK(r4.error().code() == Errc::invalid_argument);
  CHECK(contains(r4.error().message(), "(1 problem):\n  unexpected: 'n' (i64 [2] in the file)"));

  // Integers that fit convert, and are reported as converted.
  const std::vector<std::int64_t> small = {-3, 100};
  const TensorRef fits_refs[] = {{"n", DType::i64, {2}, io_test::bytes_of(small)}};
  REQUIRE(teeny::save_safetensors(dir / "g.safetensors", fits_refs));
  auto g = SafetensorsFile::open(dir / "g.safetensors");
  REQUIRE(g);
  std::vector<std::int8_t> n8(2);
  const ParamTarget fits[] = {{"n", DType::i8, {2}, io_test::writable_bytes_of(n8)}};
  auto r5 = teeny::load_parameters(*g, fits);
  REQUIRE(r5);
  CHECK(r5->converted == Keys{"n"});
  CHECK(n8 == std::vector<std::int8_t>{-3, 100});
}

TEST_CASE("load_parameters: non-strict mode loads what matches and reports the rest") {
  auto file = SafetensorsFile::open(io_test::fixture("reference.safetensors"));
  REQUIRE(file);
  std::vector<float> w(6, -1.0f), bias(4, -1.0f), missing(2, -1.0f);
  std::vector<double> scale(2);
  const ParamTarget targets[] = {
      {"fc1.weight", DType::f32, {2, 3}, io_test::writable_bytes_of(w)},
      {"fc1.bias", DType::f32, {4}, io_test::writable_bytes_of(bias)},  // file has [3]
      {"fc2.weight", DType::f32, {2}, io_test::writable_bytes_of(missing)},
      {"scale", DType::f64, {2}, io_test::writable_bytes_of(scale)},
  };
  auto report = teeny::load_parameters(*file, targets, {.strict = false});
  REQUIRE_MESSAGE(report, (report ? "" : report.error().to_string()));
  CHECK(report->loaded == Keys{"fc1.weight", "scale"});
  CHECK(report->converted.empty());
  CHECK(report->missing == Keys{"fc2.weight"});
  CHECK(report->mismatched == Keys{"fc1.bias"});
  CHECK(report->skipped_unexpected == Keys{"mask", "bn1.num_batches_tracked", "emb", "out.weight", "empty"});
  CHECK(w[5] == 65504.0f);
  CHECK(scale == std::vector<double>{0.1, -2.0});
  CHECK(bias == std::vector<float>(4, -1.0f));
  CHECK(missing == std::vector<float>(2, -1.0f));
  CHECK(teeny::to_string(*report) == "loaded 2 (0 converted), missing 1, unexpected 5, mismatched 1");
}

TEST_CASE("load_parameters: duplicate keys and wrong destination sizes are caller errors in both modes") {
  auto file = SafetensorsFile::open(io_test::fixture("reference.safetensors"));
  REQUIRE(file);
  std::vector<float> w(6), small(5);
  const ParamTarget twice[] = {{"fc1.weight", DType::f32, {2, 3}, io_test::writable_bytes_of(w)},
                               {"fc1.weight", DType::f32, {2, 3}, io_test::writable_bytes_of(w)}};
  auto dup = teeny::load_parameters(*file, twice, {.strict = false});
  REQUIRE_FALSE(dup);
  CHECK(dup.error().code() == Errc::invalid_argument);
  CHECK(contains(dup.error().message(), "two parameter targets have the key 'fc1.weight'"));

  const ParamTarget wrong_size[] = {{"fc1.weight", DType::f32, {2, 3}, io_test::writable_bytes_of(small)}};
  auto size = teeny::load_parameters(*file, wrong_size, {.strict = false});
  REQUIRE_FALSE(size);
  CHECK(size.error().code() == Errc::invalid_argument);
  CHECK(contains(size.error().message(), "parameter 'fc1.weight' (f32 [2, 3]) needs a 24-byte destination, got 20"));
}

TEST_CASE("load_parameters from tensors in memory: the file's checks and conversions, in memory's words") {
  std::vector<float> w(6, 1.0f), extra(3, 3.0f);
  const std::vector<std::int64_t> steps = {5};
  const std::vector<double> scale = {0.5};
  const std::vector<std::int64_t> big = {1, 3000000000};
  const TensorRef held[] = {
      TensorRef::of<float>("fc1.weight", w, {2, 3}),
      TensorRef::of<float>("extra.weight", extra, {3}),
      TensorRef::of<std::int64_t>("bn1.num_batches_tracked", steps, {}),
      TensorRef::of<double>("scale", scale, {1}),
      TensorRef::of<std::int64_t>("n", big, {2}),
  };
  auto source = teeny::ParamSource::of(held);
  REQUIRE(source);
  CHECK(source->name() == "weights in memory");
  CHECK(source->tensors().size() == 5);
  REQUIRE(source->find("scale") != nullptr);
  CHECK(source->find("scale")->dtype == DType::f64);
  CHECK(source->find("fc2.bias") == nullptr);

  std::vector<float> wt(8, -1.0f), stepf(1, -1.0f), scalef(1, -1.0f), fc2(2, -1.0f);
  std::vector<std::int32_t> n32(2, -1);
  const ParamTarget targets[] = {
      {"fc1.weight", DType::f32, {2, 4}, io_test::writable_bytes_of(wt)},
      {"fc2.bias", DType::f32, {2}, io_test::writable_bytes_of(fc2)},
      {"bn1.num_batches_tracked", DType::f32, {}, io_test::writable_bytes_of(stepf)},
      {"scale", DType::f32, {1}, io_test::writable_bytes_of(scalef)},  // fine on its own (converted)
      {"n", DType::i32, {2}, io_test::writable_bytes_of(n32)},
  };
  auto report = teeny::load_parameters(*source, targets);
  REQUIRE_FALSE(report);
  CHECK(report.error().code() == Errc::not_found);
  CHECK(report.error().message() ==
        "weights in memory: cannot load 5 parameters (5 problems):\n"
        "  missing: 'fc2.bias' (the model expects f32 [2])\n"
        "  unexpected: 'extra.weight' (f32 [3] among the tensors given)\n"
        "  'fc1.weight': tensor has [2, 3] but the model expects [2, 4]\n"
        "  'bn1.num_batches_tracked': tensor has i64 but the model expects f32 (an i64 value is not converted "
        "to the floating dtype f32)\n"
        "  'n': tensor has i64 and the model expects i32: element 1 is 3000000000, which does not fit in i32");
  CHECK(scalef[0] == -1.0f);  // nothing written

  // Non-strict: what matches loads, converted in native byte order (f64 -> f32, i64 -> i8).
  const std::vector<std::int64_t> small = {-3, 100};
  const TensorRef fitting[] = {TensorRef::of<double>("scale", scale, {1}), TensorRef::of<std::int64_t>("n", small, {2}),
                               TensorRef::of<float>("extra.weight", extra, {3})};
  std::vector<std::int8_t> n8(2);
  const ParamTarget some[] = {{"scale", DType::f32, {1}, io_test::writable_bytes_of(scalef)},
                              {"n", DType::i8, {2}, io_test::writable_bytes_of(n8)},
                              {"fc2.bias", DType::f32, {2}, io_test::writable_bytes_of(fc2)}};
  auto partial = teeny::load_parameters(*teeny::ParamSource::of(fitting), some, {.strict = false});
  REQUIRE_MESSAGE(partial, (partial ? "" : partial.error().to_string()));
  CHECK(partial->loaded == Keys{"scale", "n"});
  CHECK(partial->converted == Keys{"scale", "n"});
  CHECK(partial->missing == Keys{"fc2.bias"});
  CHECK(partial->skipped_unexpected == Keys{"extra.weight"});
  CHECK(scalef[0] == 0.5f);
  CHECK(n8 == std::vector<std::int8_t>{-3, 100});
}

TEST_CASE("ParamSource: a file's tensors in file order; in-memory tensors with one name or short bytes are refused") {
  auto file = SafetensorsFile::open(io_test::fixture("reference.safetensors"));
  REQUIRE(file);
  const teeny::ParamSource source = teeny::ParamSource::of(*file);
  CHECK(source.name() == "safetensors file '" + file->path() + "'");
  REQUIRE(source.tensors().size() == file->entries().size());
  for (std::size_t i = 0; i < source.tensors().size(); ++i) {
    CHECK(source.tensors()[i].name == file->entries()[i].name);
    CHECK(source.tensors()[i].data.data() == file->entries()[i].data.data());  // in place, not copied
  }

  const std::vector<float> two = {1, 2};
  const TensorRef twice[] = {TensorRef::of<float>("a", two, {2}), TensorRef::of<float>("a", two, {2})};
  auto dup = teeny::ParamSource::of(twice);
  REQUIRE_FALSE(dup);
  CHECK(dup.error().code() == Errc::duplicate);
  CHECK(dup.error().message() == "weights in memory: two tensors are named 'a'");

  const TensorRef short_data[] = {TensorRef::of<float>("a", two, {3})};
  auto size = teeny::ParamSource::of(short_data);
  REQUIRE_FALSE(size);
  CHECK(size.error().code() == Errc::invalid_argument);
  CHECK(size.error().message() == "weights in memory: tensor 'a' (f32 [3]) needs 12 bytes of data, got 8");
}

TEST_CASE("load_parameters: a dry run reports what would load, or the strict error, and writes nothing") {
  const std::vector<float> w = {1, 2, 3, 4};
  const std::vector<double> bias = {0.5, -1};
  const TensorRef held[] = {TensorRef::of<float>("fc.weight", w, {2, 2}), TensorRef::of<double>("fc.bias", bias, {2})};
  auto source = teeny::ParamSource::of(held);
  REQUIRE(source);
  std::vector<float> wt(4, -1.0f), bt(2, -1.0f);
  const ParamTarget targets[] = {{"fc.weight", DType::f32, {2, 2}, io_test::writable_bytes_of(wt)},
                                 {"fc.bias", DType::f32, {2}, io_test::writable_bytes_of(bt)}};
  auto dry = teeny::load_parameters(*source, targets, {.dry_run = true});
  REQUIRE(dry);
  CHECK(dry->loaded == Keys{"fc.weight", "fc.bias"});
  CHECK(dry->converted == Keys{"fc.bias"});
  CHECK(wt == std::vector<float>(4, -1.0f));
  CHECK(bt == std::vector<float>(2, -1.0f));

  auto without_bias = source->without_prefix("fc.b");
  CHECK(without_bias.tensors().size() == 1);
  CHECK(without_bias.find("fc.bias") == nullptr);
  auto refused = teeny::load_parameters(without_bias, targets, {.dry_run = true});
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message() ==
        "weights in memory: cannot load 2 parameters (1 problem):\n  missing: 'fc.bias' (the model expects f32 [2])");

  REQUIRE(teeny::load_parameters(*source, targets));
  CHECK(wt == w);
  CHECK(bt == std::vector<float>{0.5f, -1.0f});
}
