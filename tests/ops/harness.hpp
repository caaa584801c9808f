#pragma once
// The op test harness's host side: an op's operands as f64 values, the op made per element type by
// a generic lambda (`[]<class T>() { ... return op; }`), its arguments packed for every launch, and
// the CPU backend running it in f64 (forward, and in training builds backward) as the reference
// every other check compares with. tests/ops/cases.hpp is the table of cases; tests/ops/test_cases.cpp
// (CPU) and tests/cuda/test_kernels.cpp (GPU) drive it.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

import teeny;

namespace op_harness {

using teeny::ConcreteShape;
using teeny::TensorBinding;

struct HostTensor {
  ConcreteShape shape;
  std::vector<double> values;
  std::optional<teeny::DType> dtype{};  // for an input not of the op's element type (indices)
};

inline HostTensor random_tensor(const ConcreteShape& shape, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-2.0, 2.0);
  HostTensor t{shape, std::vector<double>(static_cast<std::size_t>(shape.numel()))};
  for (double& v : t.values) v = dist(rng);
  return t;
}

// `t` with every value moved away from 0 (|v| >= 0.5): a divisor, a reciprocal's input.
inline HostTensor away_from_zero(HostTensor t) {
  for (double& v : t.values) v = v < 0 ? v - 0.5 : v + 0.5;
  return t;
}
// `t` with every value positive (>= 0.5): log, sqrt, a pow's base, a variance.
inline HostTensor positive(HostTensor t) {
  for (double& v : t.values) v = std::abs(v) + 0.5;
  return t;
}
// `t` scaled by `s`.
inline HostTensor scaled(HostTensor t, double s) {
  for (double& v : t.values) v *= s;
  return t;
}

// Relative tolerance (of the largest output magnitude) per dtype, against the f64 reference on the
// same rounded inputs: f16 and bf16 store 11 and 8 significant bits and compute in f32; f32 and
// f64 differ from the reference by rounding only. A case may widen them (a long reduction).
struct Tolerance {
  double f64 = 1e-12;
  double f32 = 1e-5;
  double f16 = 2e-3;
  double bf16 = 1.6e-2;
  template <class T>
  double of() const {
    if constexpr (std::is_same_v<T, double>) return f64;
    if constexpr (std::is_same_v<T, float>) return f32;
    if constexpr (std::is_same_v<T, teeny::f16>) return f16;
    return bf16;
  }
};

template <class T>
T to_element(double v) {
  if constexpr (std::is_same_v<T, teeny::f16> || std::is_same_v<T, teeny::bf16>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}
template <class T>
double from_element(T v) {
  return static_cast<double>(static_cast<std::conditional_t<std::is_same_v<T, double>, double, float>>(v));
}

// `t`'s values stored as `dtype` (a float type, or i64 for a counter such as num_batches_tracked).
inline std::vector<std::byte> stored_as(const HostTensor& t, teeny::DType dtype) {
  std::vector<std::byte> out(t.values.size() * teeny::size_of(dtype));
  teeny::visit_dtype(dtype, [&]<class E>(std::type_identity<E>) {
    for (std::size_t i = 0; i < t.values.size(); ++i) {
      const E e = to_element<E>(t.values[i]);
      std::memcpy(out.data() + i * sizeof(E), &e, sizeof(E));
    }
  });
  return out;
}

// An op's output in host memory, of the op's output dtype (T, or i64 for argmax's indices), and
// its values as f64. It starts as NaN (-1 for an integer dtype), so that a value not written shows.
struct HostOutput {
  teeny::DType dtype;
  std::vector<std::byte> bytes;
  HostOutput(teeny::DType d, const ConcreteShape& shape)
      : dtype(d),
        bytes(stored_as({shape, std::vector<double>(static_cast<std::size_t>(shape.numel()),
                                                    teeny::is_floating(d) ? std::nan("") : -1.0)},
                        d)) {}
  void* data() { return bytes.data(); }
  std::vector<double> values() const {
    std::vector<double> out(bytes.size() / teeny::size_of(dtype));
    teeny::visit_dtype(dtype, [&]<class E>(std::type_identity<E>) {
      for (std::size_t i = 0; i < out.size(); ++i) {
        E e;
        std::memcpy(&e, bytes.data() + i * sizeof(E), sizeof(E));
        out[i] = from_element(e);
      }
    });
    return out;
  }
};

// An op's activations and parameters, as values.
struct Operands {
  std::vector<HostTensor> inputs;
  std::vector<HostTensor> params{};
};

// The element type T of a standard op (Op<T>): the dtype its float inputs are bound in, which its
// output need not have (argmax's is i64).
template <template <class> class Op, class T>
teeny::DType element_dtype(const Op<T>&) {
  return teeny::dtype_of<T>;
}

// Tensors bound in memory that `place` gives them (host vectors, or device buffers).
struct Bound {
  std::vector<TensorBinding> inputs;
  std::vector<TensorBinding> params;
};
template <class Op, class Place>
Bound bind(const Op& op, const Operands& operands, Place&& place) {
  Bound b;
  for (const HostTensor& t : operands.inputs) {
    const teeny::DType dtype = t.dtype.value_or(element_dtype(op));
    b.inputs.push_back({place(stored_as(t, dtype)), dtype, t.shape, 0});
  }
  for (std::size_t i = 0; i < operands.params.size(); ++i) {
    const teeny::DType dtype = teeny::param_dtype(op, i);
    b.params.push_back({place(stored_as(operands.params[i], dtype)), dtype, operands.params[i].shape, 0});
  }
  return b;
}

// Runs every launch of `op` through `run`, with its arguments packed from `bindings`.
template <class Op, class Run>
void for_each_launch(const Op& op, const teeny::OpBindings& bindings, Run&& run) {
  for (std::size_t i = 0; i < teeny::n_launches(op); ++i) {
    auto args = teeny::pack_args_for_launch(op, i, bindings);
    REQUIRE_MESSAGE(args, (args ? "" : args.error().to_string()));
    run(*args);
  }
}

// The op made by `make.template operator()<T>()` run by the CPU backend in `phase` (T = double:
// the reference), its output as f64 values.
template <class T = double, class Make>
std::vector<double> run_on_cpu(Make& make, const Operands& operands, const ConcreteShape& out_shape,
                               const teeny::RunPhase& phase) {
  auto op = make.template operator()<T>();
  std::vector<std::vector<std::byte>> host;
  const Bound b = bind(op, operands, [&](std::vector<std::byte> bytes) {
    host.push_back(std::move(bytes));
    return static_cast<void*>(host.back().data());
  });
  HostOutput y(op.output_dtype(), out_shape);
  const teeny::OpBindings bindings{b.inputs, b.params, {y.data(), y.dtype, out_shape, 0}};
  teeny::CpuContext cpu;
  cpu.set_phase(phase);
  for_each_launch(op, bindings, [&](const auto& args) {
    auto state = prepare_kernel(op, args, cpu);
    REQUIRE(state);
    run_kernel(op, args, *state, cpu);
  });
  // The inputs here are finite, and every output was written (y started as NaN, or -1).
  const std::vector<double> values = y.values();
  const bool floating = teeny::is_floating(y.dtype);
  CHECK(std::all_of(values.begin(), values.end(),
                    [floating](double v) { return floating ? std::isfinite(v) : v != -1.0; }));
  return values;
}

template <class T>
void round_to(HostTensor& t) {
  for (double& v : t.values) v = from_element(to_element<T>(v));
}

// The values as the GPU op in T holds them, for the reference too.
template <class T, class Op>
Operands rounded_for(const Op& op, const Operands& operands) {
  Operands rounded = operands;
  for (HostTensor& t : rounded.inputs) {
    if (!t.dtype) round_to<T>(t);
  }
  for (std::size_t i = 0; i < rounded.params.size(); ++i) {
    if (teeny::param_dtype(op, i) == teeny::dtype_of<T>) round_to<T>(rounded.params[i]);
  }
  return rounded;
}

#if TEENY_TRAINING
// A backward case's gradients: dL/dy, and the values the input and parameter gradients start
// from (kernels add to them); a gradient not wanted has no values (null there).
struct Gradients {
  HostTensor dy;
  std::vector<HostTensor> inputs;
  std::vector<HostTensor> params;
};

// Random dL/dy and starting gradients for `op`: one per floating input, one per trained parameter.
template <class Op>
Gradients random_gradients(const Op& op, const Operands& operands, const ConcreteShape& out_shape, unsigned seed) {
  Gradients g{random_tensor(out_shape, seed), {}, {}};
  for (const HostTensor& t : operands.inputs) {
    g.inputs.push_back(t.dtype ? HostTensor{t.shape, {}} : random_tensor(t.shape, ++seed));
  }
  for (std::size_t i = 0; i < operands.params.size(); ++i) {
    const ConcreteShape& shape = operands.params[i].shape;
    g.params.push_back(teeny::param_trainable(op, i) ? random_tensor(shape, ++seed) : HostTensor{shape, {}});
  }
  return g;
}

// Binds each gradient in memory that `place` gives it; null for one not wanted.
template <class Place>
std::vector<TensorBinding> bind_gradients(const std::vector<HostTensor>& grads, teeny::DType dtype, Place&& place) {
  std::vector<TensorBinding> out;
  for (const HostTensor& g : grads) {
    out.push_back({g.values.empty() ? nullptr : place(stored_as(g, dtype)), dtype, g.shape, 0});
  }
  return out;
}

template <class Op, class Run>
void for_each_backward_launch(const Op& op, const teeny::BackwardBindings& bindings, Run&& run) {
  for (std::size_t i = 0; i < teeny::n_backward_launches(op); ++i) {
    auto args = teeny::pack_backward_args_for_launch(op, i, bindings);
    REQUIRE_MESSAGE(args, (args ? "" : args.error().to_string()));
    run(*args);
  }
}

// Whether the op's backward packs its arguments in f64 (every launch); an op with no backward as
// built refuses here, with an error that says why.
template <class Make>
bool backward_packs(Make& make, const Operands& operands, const ConcreteShape& out_shape) {
  auto op = make.template operator()<double>();
  std::vector<std::vector<std::byte>> host;
  const auto place = [&](std::vector<std::byte> bytes) {
    host.push_back(std::move(bytes));
    return static_cast<void*>(host.back().data());
  };
  const Bound b = bind(op, operands, place);
  const Gradients start = random_gradients(op, operands, out_shape, 1);
  std::vector<double> y(static_cast<std::size_t>(out_shape.numel()));
  std::vector<double> dy = start.dy.values;
  // Named: the bindings hold spans of them.
  const std::vector<TensorBinding> grad_inputs = bind_gradients(start.inputs, teeny::DType::f64, place);
  const std::vector<TensorBinding> grad_params = bind_gradients(start.params, teeny::DType::f64, place);
  const teeny::BackwardBindings bindings{b.inputs,
                                         b.params,
                                         {y.data(), teeny::DType::f64, out_shape, 0},
                                         {dy.data(), teeny::DType::f64, out_shape, 0},
                                         grad_inputs,
                                         grad_params};
  for (std::size_t i = 0; i < teeny::n_backward_launches(op); ++i) {
    auto args = teeny::pack_backward_args_for_launch(op, i, bindings);
    if (!args) {
      MESSAGE("backward refused: " << args.error().to_string());
      return false;
    }
  }
  return true;
}

// The op's backward on the CPU in f64 (after its forward, in `phase`): the gradients it leaves.
template <class Make>
Gradients run_backward_on_cpu(Make& make, const Operands& operands, const ConcreteShape& out_shape,
                              const Gradients& start, const teeny::RunPhase& phase) {
  auto op = make.template operator()<double>();
  std::vector<std::vector<std::byte>> host;
  const auto place = [&](std::vector<std::byte> bytes) {
    host.push_back(std::move(bytes));
    return static_cast<void*>(host.back().data());
  };
  const Bound b = bind(op, operands, place);
  std::vector<double> y(static_cast<std::size_t>(out_shape.numel()));
  const TensorBinding output{y.data(), teeny::DType::f64, out_shape, 0};
  teeny::CpuContext cpu;
  cpu.set_phase(phase);
  for_each_launch(op, {b.inputs, b.params, output}, [&](const auto& args) {
    auto state = prepare_kernel(op, args, cpu);
    REQUIRE(state);
    run_kernel(op, args, *state, cpu);
  });
  std::vector<double> dy = start.dy.values;
  const auto grad_inputs = bind_gradients(start.inputs, teeny::DType::f64, place);
  const auto grad_params = bind_gradients(start.params, teeny::DType::f64, place);
  const teeny::BackwardBindings bindings{b.inputs,    b.params,   output, {dy.data(), teeny::DType::f64, out_shape, 0},
                                         grad_inputs, grad_params};
  for_each_backward_launch(op, bindings, [&](const auto& args) {
    auto state = prepare_backward_kernel(op, args, cpu);
    REQUIRE(state);
    run_backward_kernel(op, args, *state, cpu);
  });
  Gradients out = start;
  const auto read = [](std::vector<HostTensor>& grads, const std::vector<TensorBinding>& bound) {
    for (std::size_t i = 0; i < grads.size(); ++i) {
      if (bound[i].data != nullptr)
        std::memcpy(grads[i].values.data(), bound[i].data, grads[i].values.size() * sizeof(double));
    }
  };
  read(out.inputs, grad_inputs);
  read(out.params, grad_params);
  return out;
}
#endif

template <class T>
teeny::OpOutput output(const ConcreteShape& shape) {
  return {teeny::Shape(shape), teeny::dtype_of<T>};
}

}  // namespace op_harness
