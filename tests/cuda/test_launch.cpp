// The CUDA launch path, checked where it can be without a GPU: per-dtype kernel names, the packed
// parameter buffer's layout against offsets worked out by hand from the CUDA ABI's rules, launch
// geometry over a table of shapes and CUDA's limits, the errors a launch gives (no GPU, no CUDA, a
// tensor bound with the wrong dtype), and streams and events. The cases marked "GPU" run kernels
// against teeny's CPU math where a device exists and print why they skip where none does.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <set>
#include <span>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "cuda/params.hpp"
#include "cuda/runtime.hpp"
#include "math/elementwise.hpp"

import teeny;

namespace {

using teeny::ConcreteShape;
using teeny::Dim3;
using teeny::Errc;
using teeny::TensorBinding;
namespace ck = teeny::cuda_kernels;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

teeny::unary_op<float> relu_op(const ConcreteShape& shape) {
  teeny::unary_op<float> op;
  op.fn = teeny::UnaryFn::relu;
  op.out = {teeny::Shape(shape), teeny::DType::f32};
  return op;
}

}  // namespace

TEST_CASE("cuda: every op names its kernel per dtype, as the entry points kernels/cuda defines") {
  CHECK(teeny::unary_op<float>{}.kernel().forward.entry_point == "teeny_unary_f32");
  CHECK(teeny::unary_op<float>{}.kernel().forward.name == "unary_f32");
  CHECK(teeny::binary_op<teeny::bf16>{}.kernel().forward.entry_point == "teeny_binary_bf16");
  CHECK(teeny::layer_norm_op<teeny::f16>{}.kernel().forward.entry_point == "teeny_layer_norm_f16");
  CHECK(teeny::permute_op<double>{}.kernel().forward.entry_point == "teeny_strided_copy_f64");
#if TEENY_TRAINING
  REQUIRE(teeny::unary_op<float>{}.kernel().backward.has_value());
  CHECK(teeny::unary_op<float>{}.kernel().backward->entry_point == "teeny_unary_backward_f32");
  CHECK(teeny::permute_op<double>{}.kernel().backward->entry_point == "teeny_strided_add_f64");
#else
  CHECK_FALSE(teeny::unary_op<float>{}.kernel().backward.has_value());
#endif
#if TEENY_HAS_CUDA
  // Every entry point an op of the standard set names, in every dtype (and its backward's, in
  // training builds), is compiled in.
  std::set<std::string> named;
  const auto check_set = [&]<class... Ops>(std::type_identity<std::variant<Ops...>>) {
    const auto check_op = [&]<class Op>(std::type_identity<Op>) {
      if constexpr (!teeny::InputOpType<Op>) {
        const teeny::KernelInstance kernel = Op{}.kernel();
        std::vector<std::string> entries{std::string(kernel.forward.entry_point)};
        if (kernel.backward) entries.emplace_back(kernel.backward->entry_point);
        for (const std::string& entry : entries) {
          CAPTURE(entry);
          CHECK(ck::find_kernel(entry.c_str()) != nullptr);
          named.insert(entry);
        }
      }
    };
    (check_op(std::type_identity<Ops>{}), ...);
  };
  check_set(std::type_identity<teeny::standard_ops<float>>{});
  check_set(std::type_identity<teeny::standard_ops<double>>{});
  check_set(std::type_identity<teeny::standard_ops<teeny::f16>>{});
  check_set(std::type_identity<teeny::standard_ops<teeny::bf16>>{});
  CHECK(ck::find_kernel("teeny_unary_i32") == nullptr);
  // The kernels no op names, launched by teeny itself: the optimizers' three (Adam, SGD, the
  // non-finite check) and the losses' two, which the device optimizers and losses launch, and the
  // convolution's finish after cuDNN, which CudaContext launches.
  std::set<std::string> launched_directly;
  for (const char* family : {"adam", "sgd", "non_finite", "cross_entropy", "squared_error", "conv_finish"}) {
    for (const char* dtype : {"f32", "f64", "f16", "bf16"}) {
      const std::string entry = std::string("teeny_") + family + "_" + dtype;
      CAPTURE(entry);
      CHECK(ck::find_kernel(entry.c_str()) != nullptr);
      launched_directly.insert(entry);
    }
  }
#if TEENY_TRAINING
  // In training builds ops name their backwards too, so every kernel compiled in is one an op
  // names or one of those: none is left without a caller.
  for (std::size_t i = 0; i < ck::kernel_count(); ++i) {
    const std::string entry = ck::kernel_name(i);
    CAPTURE(entry);
    CHECK((named.contains(entry) || launched_directly.contains(entry)));
  }
  CHECK(ck::kernel_count() == named.size() + launched_directly.size());
#endif
#endif
}

TEST_CASE("cuda: a kernel's parameters sit where the CUDA ABI puts them") {
  // A DeviceTensor: pointer (8) + 8 sizes + 8 strides (64 + 64) + rank (4) = 140, padded to 144.
  static_assert(sizeof(ck::DeviceTensor<float>) == 144 && alignof(ck::DeviceTensor<float>) == 8);
  using Unary = ck::UnaryParamList<float>;
  // x, y, fn (1 byte), params (two doubles, aligned to 8 after the fn byte).
  CHECK(Unary::offsets == std::array<std::size_t, 4>{0, 144, 288, 296});
  CHECK(Unary::bytes == 312);
  using Binary = ck::BinaryParamList<teeny::f16>;
  // a, b, y, fn (1 byte), epilogue {bool, fn, two doubles} = 24 bytes at the next multiple of 8.
  CHECK(Binary::offsets == std::array<std::size_t, 5>{0, 144, 288, 432, 440});
  CHECK(Binary::bytes == 464);
}

TEST_CASE("cuda: an op's Args are packed field by field into its kernel's parameter buffer") {
  std::vector<float> x(12);
  std::vector<float> y(12);
  teeny::unary_op<float> op = relu_op({3, 4});
  op.fn = teeny::UnaryFn::leaky_relu;
  op.params.alpha = 0.25;
  // y is bound with padded rows (row stride 5) to see strides travel too.
  std::vector<float> padded(15);
  const TensorBinding inputs[] = {{x.data(), teeny::DType::f32, {3, 4}, 0}};
  const teeny::OpBindings bindings{inputs, {}, {padded.data(), teeny::DType::f32, {3, 4}, 5}};
  auto args = op.pack_args(bindings);
  REQUIRE(args);
  auto packed = teeny::cuda::pack_params<ck::UnaryParamList<float>>(*args);
  const std::span<const std::byte> bytes = packed.bytes();
  REQUIRE(bytes.size() == 312);

  ck::DeviceTensor<const float> px{};
  ck::DeviceTensor<float> py{};
  std::memcpy(&px, bytes.data() + 0, sizeof px);
  std::memcpy(&py, bytes.data() + 144, sizeof py);
  CHECK(px.data == x.data());
  CHECK(px.rank == 2);
  CHECK(px.shape[0] == 3);
  CHECK(px.shape[1] == 4);
  CHECK(px.strides[0] == 4);
  CHECK(px.strides[1] == 1);
  CHECK(py.data == padded.data());
  CHECK(py.strides[0] == 5);
  CHECK(static_cast<teeny::UnaryFn>(bytes[288]) == teeny::UnaryFn::leaky_relu);
  teeny::UnaryParams params{};
  std::memcpy(&params, bytes.data() + 296, sizeof params);
  CHECK(params.alpha == 0.25);

  // The pointers a launch hands CUDA point at those offsets.
  const auto pointers = packed.pointers();
  CHECK(static_cast<const std::byte*>(pointers[0]) == bytes.data());
  CHECK(static_cast<const std::byte*>(pointers[3]) == bytes.data() + 296);
}

TEST_CASE("cuda: elementwise launches cover every element with as few blocks as that takes") {
  const ConcreteShape shapes[] = {{1}, {255}, {256}, {257}, {3, 5, 7}, {64, 1000}, {2, 3, 4, 5, 6}, {1 << 22}};
  for (const ConcreteShape& shape : shapes) {
    CAPTURE(to_string(shape));
    const auto n = static_cast<std::uint64_t>(shape.numel());
    for (const auto& [grid, block] :
         {std::pair{relu_op(shape).grid(shape), relu_op(shape).block()},
          std::pair{teeny::binary_op<float>{}.grid(shape), teeny::binary_op<float>{}.block()}}) {
      CHECK(teeny::cuda::check_geometry(grid, block));
      CHECK(grid.volume() * block.volume() >= n);
      CHECK((grid.volume() - 1) * block.volume() < n);
    }
  }
  // Past CUDA's grid limit the grid stops at it, and the kernels' threads loop over the rest.
  const ConcreteShape huge{std::int64_t{1} << 40};
  CHECK(relu_op(huge).grid(huge).x == 0x7fffffffu);
  CHECK(teeny::cuda::check_geometry(relu_op(huge).grid(huge), relu_op(huge).block()));
}

TEST_CASE("cuda: each kind of launch gets the blocks its kernel divides the work into, within CUDA's limits") {
  const ConcreteShape shapes[] = {{1, 1}, {7, 300}, {2, 3, 17, 19}, {64, 1000}, {3, 1 << 20}};
  for (const ConcreteShape& y : shapes) {
    CAPTURE(to_string(y));
    const std::int64_t last = y.last();
    const std::int64_t rows = y.numel() / last;
    // A thread a row: softmax over the last dim.
    teeny::softmax_op<float> softmax;
    const Dim3 softmax_grid = softmax.grid(y);
    CHECK(teeny::cuda::check_geometry(softmax_grid, softmax.block()));
    CHECK(softmax_grid.x == static_cast<std::uint32_t>((rows + 255) / 256));
    // A block a row: layer norm over the last dim.
    teeny::layer_norm_op<float> layer_norm;
    layer_norm.attrs.normalized_shape = {last};
    CHECK(teeny::cuda::check_geometry(layer_norm.grid(y), layer_norm.block()));
    CHECK(layer_norm.grid(y).x == static_cast<std::uint32_t>(rows));
    // A block a channel: batch norm of [N, C, ...].
    teeny::batch_norm_op<float> batch_norm;
    CHECK(teeny::cuda::check_geometry(batch_norm.grid(y), batch_norm.block()));
    CHECK(batch_norm.grid(y).x == static_cast<std::uint32_t>(y[1]));
    // 16 x 16 output tiles: linear with out_features = the last dim.
    teeny::linear_op<float> linear;
    linear.attrs.out_features = last;
    const Dim3 tiles = linear.grid(y);
    CHECK(teeny::cuda::check_geometry(tiles, linear.block()));
    CHECK(tiles.x == static_cast<std::uint32_t>((last + 15) / 16));
    CHECK(tiles.y == static_cast<std::uint32_t>((rows + 15) / 16));
    // An output a thread: attention, matmul and convolution.
    for (const auto& [grid, block] :
         {std::pair{teeny::attention_op<float>{}.grid(y), teeny::attention_op<float>{}.block()},
          std::pair{teeny::matmul_op<float>{}.grid(y), teeny::matmul_op<float>{}.block()},
          std::pair{teeny::conv_op<float>{}.grid(y), teeny::conv_op<float>{}.block()}}) {
      CHECK(teeny::cuda::check_geometry(grid, block));
      CHECK(grid.volume() * block.volume() >= static_cast<std::uint64_t>(y.numel()));
      CHECK((grid.volume() - 1) * block.volume() < static_cast<std::uint64_t>(y.numel()));
    }
  }
}

TEST_CASE("cuda: launch geometry outside CUDA's limits is refused, saying which limit") {
  using teeny::cuda::check_geometry;
  CHECK(check_geometry({1, 1, 1}, {1024, 1, 1}));
  CHECK(check_geometry({0x7fffffffu, 65535, 65535}, {32, 32, 1}));
  CHECK_FALSE(check_geometry({0, 1, 1}, {256, 1, 1}));
  CHECK_FALSE(check_geometry({1, 1, 1}, {0, 1, 1}));
  CHECK_FALSE(check_geometry({1, 1, 1}, {1025, 1, 1}));
  CHECK_FALSE(check_geometry({1, 1, 1}, {1, 1, 65}));
  CHECK_FALSE(check_geometry({1, 65536, 1}, {256, 1, 1}));
  CHECK_FALSE(check_geometry({0x80000000u, 1, 1}, {256, 1, 1}));
  auto refused = check_geometry({1, 1, 1}, {2048, 1, 1});
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code() == Errc::out_of_range);
  CHECK(contains(refused.error().message(), "(2048, 1, 1)"));
}

TEST_CASE("cuda: a CUDA error code becomes a teeny error with CUDA's name and words for it") {
  const teeny::Error e = teeny::cuda::cuda_error(2, "allocating 8 bytes");
  CHECK(e.code() == Errc::device);
  CHECK(contains(e.message(), "allocating 8 bytes"));
#if TEENY_HAS_CUDA
  CHECK(contains(e.message(), "cudaErrorMemoryAllocation"));
  CHECK(contains(teeny::cuda::cuda_error(100, "x").message(), "cudaErrorNoDevice"));
#endif
}

TEST_CASE("cuda: a launch that cannot run says which kernel, node, op and dtype, and why") {
  std::vector<float> x(6);
  std::vector<float> y(6);
  const TensorBinding inputs[] = {{x.data(), teeny::DType::f32, {2, 3}, 0}};
  const teeny::OpBindings bindings{inputs, {}, {y.data(), teeny::DType::f32, {2, 3}, 0}};
  const auto op = relu_op({2, 3});
  if (teeny::cuda::device_count() > 0) {
    std::printf("SKIP (no-GPU case): a GPU is present; the GPU cases run the kernels instead\n");
    return;
  }
  auto status = teeny::cuda::launch(op, bindings, "relu1");
  REQUIRE_FALSE(status);
  const std::string message = status.error().message();
  CAPTURE(message);
  CHECK(contains(message, "teeny_unary_f32"));
  CHECK(contains(message, "node 'relu1'"));
  CHECK(contains(message, "op unary"));
  CHECK(contains(message, "dtype f32"));
#if TEENY_HAS_CUDA
  CHECK(status.error().code() == Errc::device);
  CHECK(contains(message, "cudaError"));  // no device, or no driver, as the runtime says
  CHECK(contains(message, "grid (1, 1, 1) and block (256, 1, 1)"));

  // Args are packed before anything reaches CUDA: a tensor bound with the wrong dtype is named.
  std::vector<double> wide(6);
  const TensorBinding wide_inputs[] = {{wide.data(), teeny::DType::f64, {2, 3}, 0}};
  const teeny::OpBindings mismatched{wide_inputs, {}, {y.data(), teeny::DType::f32, {2, 3}, 0}};
  auto refused = teeny::cuda::launch(op, mismatched, "relu2");
  REQUIRE_FALSE(refused);
  CAPTURE(refused.error().message());
  CHECK(refused.error().code() == Errc::dtype_mismatch);
  CHECK(contains(refused.error().message(), "node 'relu2'"));
  CHECK(contains(refused.error().message(), "bound as f64"));
#else
  CHECK(status.error().code() == Errc::unsupported);
  CHECK(contains(message, "built without CUDA"));
#endif
}

TEST_CASE("cuda: device memory without a GPU is an error, not a crash") {
  if (teeny::cuda::device_count() > 0) return;  // the GPU cases use it for real
  auto buffer = teeny::cuda::DeviceBuffer::allocate(1024);
  REQUIRE_FALSE(buffer);
  CHECK(contains(buffer.error().message(), "1024 bytes"));
  auto empty = teeny::cuda::DeviceBuffer{};
  CHECK(empty.data() == nullptr);
  std::byte host[8] = {};
  CHECK_FALSE(empty.upload(host));  // more bytes than the (empty) buffer holds
}

namespace {

// Runs `op` on the GPU over host data `x` (and `b` for binary ops) and returns y.
template <class T, class Op>
std::vector<T> run_on_gpu(const Op& op, const std::vector<std::vector<T>>& operands,
                          const std::vector<ConcreteShape>& shapes, const ConcreteShape& out_shape) {
  std::vector<teeny::cuda::DeviceBuffer> buffers;
  std::vector<TensorBinding> inputs;
  for (std::size_t i = 0; i < operands.size(); ++i) {
    auto buffer = teeny::cuda::DeviceBuffer::allocate(operands[i].size() * sizeof(T));
    REQUIRE(buffer);
    REQUIRE(buffer->upload(std::as_bytes(std::span(operands[i]))));
    inputs.push_back({buffer->data(), teeny::dtype_of<T>, shapes[i], 0});
    buffers.push_back(std::move(*buffer));
  }
  std::vector<T> y(static_cast<std::size_t>(out_shape.numel()));
  auto out = teeny::cuda::DeviceBuffer::allocate(y.size() * sizeof(T));
  REQUIRE(out);
  const teeny::OpBindings bindings{inputs, {}, {out->data(), teeny::dtype_of<T>, out_shape, 0}};
  auto status = teeny::cuda::launch(op, bindings, "gpu-case");
  REQUIRE_MESSAGE(status, (status ? "" : status.error().to_string()));
  REQUIRE(teeny::cuda::synchronize("the GPU case"));
  REQUIRE(out->download(std::as_writable_bytes(std::span(y))));
  return y;
}

// Relative tolerance per dtype: device exp/erf/tanh differ from the host's by a few ulps in f32
// and f64; f16 and bf16 compute in float, so they may land one 16-bit rounding step apart.
template <class T>
double tolerance() {
  if constexpr (std::is_same_v<T, double>) return 1e-13;
  if constexpr (std::is_same_v<T, float>) return 4e-6;
  if constexpr (std::is_same_v<T, teeny::f16>) return 1e-3;
  return 8e-3;
}

template <class T>
void check_unary_on_gpu() {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> dist(0.05, 4.0);
  const ConcreteShape shape{5, 201};
  std::vector<T> x(static_cast<std::size_t>(shape.numel()));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = T(static_cast<C>((i % 2 ? -1 : 1) * dist(rng)));
  for (int f = 0; f < static_cast<int>(teeny::UnaryFn::count); ++f) {
    teeny::unary_op<T> op;
    op.fn = static_cast<teeny::UnaryFn>(f);
    op.params = {0.5, 20.0};
    op.out = {teeny::Shape(shape), teeny::dtype_of<T>};
    const std::vector<T> y = run_on_gpu<T>(op, {x}, {shape}, shape);
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double want =
          static_cast<double>(static_cast<C>(T(teeny::math::apply_unary(op.fn, static_cast<C>(x[i]), op.params))));
      const double got = static_cast<double>(static_cast<C>(y[i]));
      if (std::isnan(want)) {
        CHECK(std::isnan(got));
        continue;
      }
      CAPTURE(f);
      CAPTURE(i);
      CHECK(std::abs(got - want) <= tolerance<T>() * std::max(1.0, std::abs(want)));
    }
  }
}

}  // namespace

TEST_CASE("cuda (GPU): every unary function in every dtype matches teeny's CPU math" * doctest::test_suite("gpu")) {
  check_unary_on_gpu<float>();
  check_unary_on_gpu<double>();
  check_unary_on_gpu<teeny::f16>();
  check_unary_on_gpu<teeny::bf16>();
}

TEST_CASE("cuda (GPU): a broadcasting add with a fused ReLU matches the CPU's" * doctest::test_suite("gpu")) {
  const ConcreteShape a_shape{4, 1, 5};
  const ConcreteShape b_shape{3, 1};
  const ConcreteShape y_shape{4, 3, 5};
  std::vector<float> a(20);
  std::vector<float> b(3);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i) - 9.5f;
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i) * 2.0f - 1.0f;
  teeny::binary_op<float> op;
  op.fn = teeny::BinaryFn::add;
  op.epilogue = {true, teeny::UnaryFn::relu, {}};
  op.out = {teeny::Shape(y_shape), teeny::DType::f32};
  const std::vector<float> y = run_on_gpu<float>(op, {a, b}, {a_shape, b_shape}, y_shape);
  for (std::int64_t i = 0; i < 4; ++i) {
    for (std::int64_t j = 0; j < 3; ++j) {
      for (std::int64_t k = 0; k < 5; ++k) {
        const float want = std::max(0.0f, a[static_cast<std::size_t>(i * 5 + k)] + b[static_cast<std::size_t>(j)]);
        CHECK(y[static_cast<std::size_t>((i * 3 + j) * 5 + k)] == want);
      }
    }
  }
}

TEST_CASE("cuda: streams and events, or the error saying why there are none") {
  CHECK(teeny::cuda::Stream{}.handle() == nullptr);  // the default stream
  auto stream = teeny::cuda::Stream::create();
  if (teeny::cuda::device_count() == 0) {
    REQUIRE_FALSE(stream);
    CHECK(contains(stream.error().message(), "creating a CUDA stream"));
    CHECK(stream.error().code() == (teeny::cuda::compiled_in ? Errc::device : Errc::unsupported));
    CHECK_FALSE(teeny::cuda::Event::create());
    return;
  }
  // GPU: a launch on a stream of its own, timed by two events recorded around it.
  REQUIRE(stream);
  auto start = teeny::cuda::Event::create();
  auto end = teeny::cuda::Event::create();
  REQUIRE(start);
  REQUIRE(end);
  const ConcreteShape shape{1 << 20};
  auto x = teeny::cuda::DeviceBuffer::allocate(std::size_t{1} << 22);
  auto y = teeny::cuda::DeviceBuffer::allocate(std::size_t{1} << 22);
  REQUIRE(x);
  REQUIRE(y);
  const TensorBinding inputs[] = {{x->data(), teeny::DType::f32, shape, 0}};
  const teeny::OpBindings bindings{inputs, {}, {y->data(), teeny::DType::f32, shape, 0}};
  REQUIRE(start->record(*stream));
  REQUIRE(teeny::cuda::launch(relu_op(shape), bindings, "relu", stream->handle()));
  REQUIRE(end->record(*stream));
  REQUIRE(stream->synchronize());
  auto ms = teeny::cuda::Event::elapsed_ms(*start, *end);
  REQUIRE(ms);
  CHECK(*ms >= 0.0f);
}

#if !TEENY_HAS_CUDA
// (tests/cuda/test_models.cpp, built with CUDA only, checks what load_cuda says without a GPU.)
TEST_CASE("cuda: load_cuda in a build without CUDA fails, saying so") {
  teeny::GraphBuilder b;
  const teeny::Value x = b.input("x", teeny::DType::f32, {2, 3});
  b.output("y", b.relu(x));
  auto graph = std::move(b).build();
  REQUIRE(graph);
  const auto check = [](const auto& model, const std::string& device) {
    REQUIRE_FALSE(model);
    CAPTURE(model.error().message());
    CHECK(model.error().code() == Errc::unsupported);
    CHECK(contains(model.error().message(), "selecting CUDA device " + device + ":"));
    CHECK(contains(model.error().message(), "built without CUDA"));
  };
  check(teeny::cuda::load_cuda(*graph, {}), "0");
  check(teeny::cuda::load_cuda<double>(*graph, {}, {.device = 2}), "2");
}
#endif
