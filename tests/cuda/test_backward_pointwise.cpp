// The CUDA backward kernels of the pointwise and data-movement ops (elementwise, dropout, shape,
// pooling, softmax and reductions) in the cases beyond the op table's (tests/ops/cases.hpp, which
// tests/cuda/test_kernels.cpp runs): more broadcast shapes, ties, an operand given twice, casts
// across dtypes, the eval phase. Each op's backward runs on the GPU in
// f32, f64, f16 and bf16 and by the CPU kernel in f64 on the same (rounded) inputs, from random
// dL/dy and random starting gradients (kernels add to them). Without a GPU the cases still pack
// every launch's arguments in every dtype (and run the CPU reference), then print why they skip.
#include "cuda/kernel_check.hpp"

#if TEENY_TRAINING

using namespace kernel_check;  // NOLINT(google-build-using-namespace): the harness, in every case

namespace {

// A tensor of few distinct values, so that maxima tie (max pooling's and amax's tie rules).
HostTensor with_ties(const ConcreteShape& shape) {
  HostTensor t{shape, std::vector<double>(static_cast<std::size_t>(shape.numel()))};
  for (std::size_t i = 0; i < t.values.size(); ++i) t.values[i] = static_cast<double>((i * 7) % 4) - 1.0;
  return t;
}

}  // namespace

TEST_CASE("cuda backward: binary ops sum each operand's gradient over its broadcast dims") {
  struct Shapes {
    ConcreteShape a, b, y;
  };
  const Shapes shapes[] = {
      {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}},  // no broadcasting
      {{2, 3, 4}, {3, 1}, {2, 3, 4}},     // b repeated along dims 0 (missing) and 2
      {{2, 1, 4}, {3, 1}, {2, 3, 4}},     // both repeated
      {{5}, {4, 1, 5}, {4, 1, 5}},        // a repeated along the leading dims
  };
  for (const teeny::BinaryFn fn :
       {teeny::BinaryFn::add, teeny::BinaryFn::sub, teeny::BinaryFn::mul, teeny::BinaryFn::div, teeny::BinaryFn::pow,
        teeny::BinaryFn::maximum, teeny::BinaryFn::minimum, teeny::BinaryFn::fmod}) {
    CAPTURE(static_cast<int>(fn));
    for (const Shapes& s : shapes) {
      CAPTURE(s.y);
      HostTensor a = random_tensor(s.a, 2);
      HostTensor b = random_tensor(s.b, 3);
      if (fn == teeny::BinaryFn::div || fn == teeny::BinaryFn::fmod) b = away_from_zero(b);
      if (fn == teeny::BinaryFn::pow) a = positive(a);
      check_backward_against_cpu(
          [fn, y = s.y]<class T>() {
            teeny::binary_op<T> op;
            op.fn = fn;
            op.out = output<T>(y);
            return op;
          },
          {{a, b}}, s.y);
    }
  }
  // An activation fused after the op: its derivative (from the output) comes first.
  for (const teeny::UnaryFn act : {teeny::UnaryFn::relu, teeny::UnaryFn::sigmoid}) {
    CAPTURE(static_cast<int>(act));
    check_backward_against_cpu(
        [act]<class T>() {
          teeny::binary_op<T> op;
          op.fn = teeny::BinaryFn::mul;
          op.epilogue = {true, act, {}};
          op.out = output<T>({2, 3, 4});
          return op;
        },
        {{random_tensor({2, 3, 4}, 4), random_tensor({3, 1}, 5)}}, {2, 3, 4});
  }
}

namespace {

// x op x: both operands one tensor, so both gradients one buffer (the training plan binds an
// input's gradient once). The GPU must add both partials to each element, as the CPU does.
template <class T>
void check_shared_operand(teeny::BinaryFn fn, bool gpu) {
  CAPTURE(teeny::name(teeny::dtype_of<T>));
  const ConcreteShape shape{3, 5, 7};
  const auto make = [fn, &shape]<class E>() {
    teeny::binary_op<E> op;
    op.fn = fn;
    op.out = output<E>(shape);
    return op;
  };
  HostTensor x = random_tensor(shape, 60);
  HostTensor dy = random_tensor(shape, 61);
  HostTensor start = random_tensor(shape, 62);
  round_to<T>(x);
  round_to<T>(dy);
  round_to<T>(start);

  // The CPU in f64: forward, then backward into one gradient buffer.
  auto cpu_op = make.template operator()<double>();
  std::vector<double> xv = x.values;
  std::vector<double> y(xv.size());
  std::vector<double> dyv = dy.values;
  std::vector<double> want = start.values;
  {
    const TensorBinding inputs[] = {{xv.data(), teeny::DType::f64, shape, 0}, {xv.data(), teeny::DType::f64, shape, 0}};
    const TensorBinding output_binding{y.data(), teeny::DType::f64, shape, 0};
    teeny::CpuContext cpu;
    auto args = cpu_op.pack_args({inputs, {}, output_binding});
    REQUIRE(args);
    auto state = prepare_kernel(cpu_op, *args, cpu);
    REQUIRE(state);
    run_kernel(cpu_op, *args, *state, cpu);
    const TensorBinding grads[] = {{want.data(), teeny::DType::f64, shape, 0},
                                   {want.data(), teeny::DType::f64, shape, 0}};
    auto g =
        cpu_op.pack_backward_args({inputs, {}, output_binding, {dyv.data(), teeny::DType::f64, shape, 0}, grads, {}});
    REQUIRE(g);
    auto backward_state = prepare_backward_kernel(cpu_op, *g, cpu);
    REQUIRE(backward_state);
    run_backward_kernel(cpu_op, *g, *backward_state, cpu);
  }

  auto op = make.template operator()<T>();
  const teeny::DType dtype = teeny::dtype_of<T>;
  HostTensor y_rounded{shape, y};
  round_to<T>(y_rounded);
  std::vector<std::vector<std::byte>> host;
  std::vector<teeny::cuda::DeviceBuffer> buffers;
  const auto place = [&](const std::vector<std::byte>& bytes) -> void* {
    if (!gpu) {
      host.push_back(bytes);
      return host.back().data();
    }
    auto buffer = teeny::cuda::DeviceBuffer::allocate(bytes.size());
    REQUIRE(buffer);
    REQUIRE(buffer->upload(bytes));
    buffers.push_back(std::move(*buffer));
    return buffers.back().data();
  };
  void* xd = place(stored_as(x, dtype));
  void* gd = place(stored_as(start, dtype));
  const TensorBinding inputs[] = {{xd, dtype, shape, 0}, {xd, dtype, shape, 0}};
  const TensorBinding grads[] = {{gd, dtype, shape, 0}, {gd, dtype, shape, 0}};
  const teeny::BackwardBindings bindings{
      inputs, {}, {place(stored_as(y_rounded, dtype)), dtype, shape, 0}, {place(stored_as(dy, dtype)), dtype, shape, 0},
      grads,  {}};
  if (!gpu) {
    using List = typename teeny::cuda::KernelParams<decltype(op)>::backward;
    auto g = op.pack_backward_args(bindings);
    REQUIRE(g);
    (void)teeny::cuda::pack_params<List>(*g);
    return;
  }
  auto status = teeny::cuda::launch_backward(op, bindings, "gpu-shared");
  REQUIRE_MESSAGE(status, (status ? "" : status.error().to_string()));
  REQUIRE(teeny::cuda::synchronize("the GPU case"));
  std::vector<T> got(want.size());
  REQUIRE(teeny::cuda::copy_to_host(std::as_writable_bytes(std::span(got)), gd));
  double scale = 1;
  for (double w : want) scale = std::max(scale, std::abs(w));
  for (std::size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(std::abs(from_element(got[i]) - want[i]) <= 4 * Tolerance{}.of<T>() * scale);
  }
}

}  // namespace

TEST_CASE("cuda backward: x op x adds both operands' gradients into x's one buffer") {
  const bool gpu = teeny::cuda::device_count() > 0;
  for (const teeny::BinaryFn fn : {teeny::BinaryFn::mul, teeny::BinaryFn::sub, teeny::BinaryFn::maximum}) {
    CAPTURE(static_cast<int>(fn));
    check_shared_operand<float>(fn, gpu);
    check_shared_operand<double>(fn, gpu);
    check_shared_operand<teeny::f16>(fn, gpu);
    check_shared_operand<teeny::bf16>(fn, gpu);
  }
  if (!gpu) std::printf("SKIP (GPU backward launch): %s\n", teeny::cuda::no_device_reason().c_str());
}

TEST_CASE("cuda dropout: the CPU's mask in the training phase, the identity in eval, and its backward") {
  const HostTensor x = random_tensor({4, 5, 6}, 6);
  const auto make = []<class T>() {
    teeny::dropout_op<T> op;
    op.attrs.p = 0.3;
    op.stream = 11;
    op.out = output<T>({4, 5, 6});
    return op;
  };
  check_against_cpu(make, {{x}}, {4, 5, 6}, teeny::RunPhase{true, 7, 3});
  check_against_cpu(make, {{x}}, {4, 5, 6});  // eval: y = x
  check_backward_against_cpu(make, {{x}}, {4, 5, 6}, teeny::RunPhase{true, 7, 3});
  check_backward_against_cpu(make, {{x}}, {4, 5, 6}, teeny::RunPhase{false, 7, 3});
}

TEST_CASE("cuda backward: reshape, permute, slice and concat add dy back where x's elements went") {
  const HostTensor x = random_tensor({2, 3, 4}, 7);
  check_backward_against_cpu(
      []<class T>() {
        teeny::reshape_op<T> op;
        op.out = output<T>({6, 4});
        return op;
      },
      {{x}}, {6, 4});
  check_backward_against_cpu(
      []<class T>() {
        teeny::permute_op<T> op;
        op.dims = {2, 0, 1};
        op.out = output<T>({4, 2, 3});
        return op;
      },
      {{x}}, {4, 2, 3});
  check_backward_against_cpu(
      []<class T>() {
        teeny::slice_op<T> op;
        op.axis = 2;
        op.start = 1;
        op.step = 2;
        op.out = output<T>({2, 3, 2});
        return op;
      },
      {{x}}, {2, 3, 2});
  check_backward_against_cpu(
      []<class T>() {
        teeny::concat_op<T> op;  // one backward launch per input
        op.axis = 1;
        op.inputs = 3;
        op.out = output<T>({2, 6, 4});
        return op;
      },
      {{x, random_tensor({2, 2, 4}, 8), random_tensor({2, 1, 4}, 9)}}, {2, 6, 4});
}

TEST_CASE("cuda backward: padding gathers every output that read an element, nearest upsampling too") {
  const HostTensor x = random_tensor({2, 3, 4}, 10);
  for (const teeny::PadMode mode : {teeny::PadMode::constant, teeny::PadMode::reflect, teeny::PadMode::replicate}) {
    CAPTURE(static_cast<int>(mode));
    check_backward_against_cpu(
        [mode]<class T>() {
          teeny::pad_op<T> op;
          op.attrs.pads = {1, 2, 2, -1};  // last dim: 1 before, 2 after; dim 1: 2 before, 1 cropped after
          op.attrs.mode = mode;
          op.attrs.value = 0.5;
          op.out = output<T>({2, 4, 7});
          return op;
        },
        {{x}}, {2, 4, 7});
  }
  // Replicate pads wider than the dim: each border element takes a whole run of outputs.
  check_backward_against_cpu(
      []<class T>() {
        teeny::pad_op<T> op;
        op.attrs.pads = {3, 4, 1, 0};
        op.attrs.mode = teeny::PadMode::replicate;
        op.out = output<T>({3, 9});
        return op;
      },
      {{random_tensor({2, 2}, 11)}}, {3, 9});
  // Constant padding that crops on both sides: some elements get no gradient.
  check_backward_against_cpu(
      []<class T>() {
        teeny::pad_op<T> op;
        op.attrs.pads = {-1, -2};
        op.out = output<T>({2, 3, 1});
        return op;
      },
      {{x}}, {2, 3, 1});

  const HostTensor image = random_tensor({2, 2, 3, 8}, 12);
  check_backward_against_cpu(
      []<class T>() {
        teeny::upsample_op<T> op;
        op.attrs.scale_h = 2;
        op.attrs.scale_w = 1.5;
        op.out = output<T>({2, 2, 6, 12});
        return op;
      },
      {{image}}, {2, 2, 6, 12});
  // Fractional scales both ways: rows read 1 or 2 times, some columns never.
  check_backward_against_cpu(
      []<class T>() {
        teeny::upsample_op<T> op;
        op.attrs.scale_h = 1.5;
        op.attrs.scale_w = 0.75;
        op.out = output<T>({2, 2, 4, 6});
        return op;
      },
      {{image}}, {2, 2, 4, 6});
}

namespace {

// The backward of a cast From -> To on the GPU against the CPU kernel's: both add dy converted
// back to From with math::cast_gradient_add, so the gradients agree exactly.
template <class From, class To>
void check_cast_backward(unsigned seed) {
  constexpr teeny::DType from = teeny::dtype_of<From>;
  constexpr teeny::DType to = teeny::dtype_of<To>;
  CAPTURE(teeny::name(from));
  CAPTURE(teeny::name(to));
  const ConcreteShape shape{5, 67};
  const std::int64_t n = shape.numel();
  teeny::cast_op<float> op;  // its T only names the kernels; the dtypes are the bindings'
  op.dtype = to;
  op.out = teeny::OpOutput{teeny::Shape(shape), to};
  const std::vector<std::byte> x = stored_as(random_tensor(shape, seed), from);
  const std::vector<std::byte> dy = stored_as(random_tensor(shape, seed + 1), to);
  const std::vector<std::byte> dx = stored_as(random_tensor(shape, seed + 2), from);
  std::vector<std::byte> y(static_cast<std::size_t>(n) * teeny::size_of(to));

  // The CPU's gradient, on host copies.
  std::vector<std::byte> want = dx;
  {
    const TensorBinding inputs[] = {{const_cast<std::byte*>(x.data()), from, shape, 0}};
    const TensorBinding grads[] = {{want.data(), from, shape, 0}};
    const teeny::BackwardBindings b{
        inputs, {}, {y.data(), to, shape, 0}, {const_cast<std::byte*>(dy.data()), to, shape, 0}, grads, {}};
    auto args = op.pack_backward_args(b);
    REQUIRE_MESSAGE(args, (args ? "" : args.error().to_string()));
    teeny::CpuContext cpu;
    auto state = prepare_backward_kernel(op, *args, cpu);
    REQUIRE(state);
    run_backward_kernel(op, *args, *state, cpu);
  }

  if (teeny::cuda::device_count() == 0) {
    const TensorBinding inputs[] = {{const_cast<std::byte*>(x.data()), from, shape, 0}};
    std::vector<std::byte> got = dx;
    const TensorBinding grads[] = {{got.data(), from, shape, 0}};
    const teeny::BackwardBindings b{
        inputs, {}, {y.data(), to, shape, 0}, {const_cast<std::byte*>(dy.data()), to, shape, 0}, grads, {}};
    auto args = op.pack_backward_args(b);
    REQUIRE(args);
    using List = typename teeny::cuda::KernelParams<teeny::cast_op<float>>::backward;
    (void)teeny::cuda::pack_params<List>(*args);
    return;
  }
  std::vector<teeny::cuda::DeviceBuffer> buffers;
  const auto place = [&](const std::vector<std::byte>& bytes) -> void* {
    auto buffer = teeny::cuda::DeviceBuffer::allocate(bytes.size());
    REQUIRE(buffer);
    REQUIRE(buffer->upload(bytes));
    buffers.push_back(std::move(*buffer));
    return buffers.back().data();
  };
  const TensorBinding inputs[] = {{place(x), from, shape, 0}};
  const TensorBinding grads[] = {{place(dx), from, shape, 0}};
  const teeny::BackwardBindings b{inputs, {}, {place(y), to, shape, 0}, {place(dy), to, shape, 0}, grads, {}};
  auto status = teeny::cuda::launch_backward(op, b, "gpu-cast");
  REQUIRE_MESSAGE(status, (status ? "" : status.error().to_string()));
  REQUIRE(teeny::cuda::synchronize("the GPU cast"));
  std::vector<std::byte> got(want.size());
  REQUIRE(teeny::cuda::copy_to_host(std::as_writable_bytes(std::span(got)), grads[0].data));
  for (std::int64_t i = 0; i < n; ++i) {
    CAPTURE(i);
    From g;
    From w;
    std::memcpy(&g, got.data() + i * sizeof(From), sizeof(From));
    std::memcpy(&w, want.data() + i * sizeof(From), sizeof(From));
    CHECK(from_element(g) == from_element(w));
  }
}

}  // namespace

TEST_CASE("cuda backward: a cast between floating dtypes adds dy in x's dtype, exactly as the CPU") {
  check_cast_backward<float, teeny::f16>(20);
  check_cast_backward<teeny::f16, float>(23);
  check_cast_backward<float, teeny::bf16>(26);
  check_cast_backward<teeny::bf16, float>(29);
  check_cast_backward<double, float>(32);
  check_cast_backward<float, double>(35);
  check_cast_backward<teeny::f16, teeny::bf16>(38);
  check_cast_backward<double, teeny::f16>(41);
  if (teeny::cuda::device_count() == 0) {
    std::printf("SKIP (GPU cast backward launch): %s\n", teeny::cuda::no_device_reason().c_str());
  }
}

TEST_CASE("cuda backward: max pooling passes dy to each window's winner, ties and padding included") {
  const HostTensor x = random_tensor({2, 3, 8, 7}, 14);
  const auto dilated = []<class T>() {
    teeny::max_pool2d_op<T> op;
    op.attrs.kernel = {3, 3};
    op.attrs.stride = teeny::Size2{2, 2};
    op.attrs.padding = {1, 1};
    op.attrs.dilation = {1, 2};
    op.out = output<T>({2, 3, 4, 3});
    return op;
  };
  check_backward_against_cpu(dilated, {{x}}, {2, 3, 4, 3});
  const auto ceil_mode = []<class T>() {
    teeny::max_pool2d_op<T> op;  // overlapping windows, the last row of windows past the input
    op.attrs.kernel = {3, 3};
    op.attrs.stride = teeny::Size2{2, 2};
    op.attrs.padding = {1, 1};
    op.attrs.ceil_mode = true;
    op.out = output<T>({2, 3, 5, 4});
    return op;
  };
  check_backward_against_cpu(ceil_mode, {{x}}, {2, 3, 5, 4});
  check_backward_against_cpu(ceil_mode, {{with_ties({2, 3, 8, 7})}}, {2, 3, 5, 4});
  // The 2x2 tiling the CPU has a fast path for, with ties (the first maximum wins).
  check_backward_against_cpu(
      []<class T>() {
        teeny::max_pool2d_op<T> op;
        op.attrs.kernel = {2, 2};
        op.out = output<T>({2, 3, 4, 3});
        return op;
      },
      {{with_ties({2, 3, 8, 6})}}, {2, 3, 4, 3});
}

TEST_CASE("cuda backward: average and adaptive average pooling share dy over overlapping windows") {
  const HostTensor x = random_tensor({2, 3, 8, 7}, 15);
  check_backward_against_cpu(
      []<class T>() {
        teeny::avg_pool2d_op<T> op;
        op.attrs.kernel = {3, 3};
        op.attrs.stride = teeny::Size2{2, 2};
        op.attrs.padding = {1, 1};
        op.attrs.ceil_mode = true;
        op.attrs.count_include_pad = false;
        op.out = output<T>({2, 3, 5, 4});
        return op;
      },
      {{x}}, {2, 3, 5, 4});
  check_backward_against_cpu(
      []<class T>() {
        teeny::avg_pool2d_op<T> op;
        op.attrs.kernel = {3, 2};
        op.attrs.stride = teeny::Size2{1, 1};
        op.attrs.padding = {1, 1};
        op.attrs.count_include_pad = true;
        op.out = output<T>({2, 3, 8, 8});
        return op;
      },
      {{x}}, {2, 3, 8, 8});
  check_backward_against_cpu(
      []<class T>() {
        teeny::avg_pool2d_op<T> op;
        op.attrs.kernel = {3, 3};
        op.attrs.stride = teeny::Size2{2, 1};
        op.attrs.divisor_override = 5;
        op.out = output<T>({2, 3, 3, 5});
        return op;
      },
      {{x}}, {2, 3, 3, 5});
  check_backward_against_cpu(
      []<class T>() {
        teeny::adaptive_avg_pool2d_op<T> op;
        op.attrs.output_size = {3, 2};
        op.out = output<T>({2, 3, 3, 2});
        return op;
      },
      {{x}}, {2, 3, 3, 2});
  check_backward_against_cpu(
      []<class T>() {
        teeny::adaptive_avg_pool2d_op<T> op;  // more outputs than inputs: each input in several
        op.attrs.output_size = {5, 9};
        op.out = output<T>({1, 2, 5, 9});
        return op;
      },
      {{random_tensor({1, 2, 3, 4}, 16)}}, {1, 2, 5, 9});
}

TEST_CASE("cuda backward: softmax and log_softmax, along an inner and the last dim") {
  const HostTensor x = random_tensor({3, 4, 5}, 17);
  for (const bool log : {false, true}) {
    CAPTURE(log);
    for (const std::int64_t axis : {1, -1}) {
      CAPTURE(axis);
      check_backward_against_cpu(
          [log, axis]<class T>() {
            teeny::softmax_op<T> op;
            op.axis = axis;
            op.log = log;
            op.out = output<T>({3, 4, 5});
            return op;
          },
          {{x}}, {3, 4, 5});
    }
  }
}

TEST_CASE("cuda backward: sum, mean and amax reductions, amax's ties sharing dy evenly") {
  const HostTensor x = random_tensor({3, 4, 5}, 18);
  for (const teeny::ReduceFn fn : {teeny::ReduceFn::sum, teeny::ReduceFn::mean, teeny::ReduceFn::max}) {
    CAPTURE(static_cast<int>(fn));
    const auto over_0_2 = [fn]<class T>() {
      teeny::reduce_op<T> op;
      op.fn = fn;
      op.axes = {0, 2};
      op.out = output<T>({4});
      return op;
    };
    check_backward_against_cpu(over_0_2, {{x}}, {4});
    check_backward_against_cpu(
        [fn]<class T>() {
          teeny::reduce_op<T> op;
          op.fn = fn;
          op.axes = {-1};
          op.keepdim = true;
          op.out = output<T>({3, 4, 1});
          return op;
        },
        {{x}}, {3, 4, 1});
    check_backward_against_cpu(
        [fn]<class T>() {
          teeny::reduce_op<T> op;  // every dim: one output
          op.fn = fn;
          op.out = output<T>({});
          return op;
        },
        {{x}}, {});
    if (fn == teeny::ReduceFn::max) check_backward_against_cpu(over_0_2, {{with_ties({3, 4, 5})}}, {4});
  }
}

#endif
