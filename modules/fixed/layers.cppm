// teeny.fixed:layers — the layers of a typed model, declared as in PyTorch (a Linear knows its
// in_features, a Conv2d its in_channels) and named as PyTorch names them, so that state_dict keys
// map. Calling a layer on a value checks the value's shape against the declaration at compile
// time; a mismatch stops the build with a message that names the layer and both shapes:
//
//   static assertion failed due to requirement 'input_matches<Name<4>{"fc2"}, "Linear",
//   expected<Dims<64, 512>>, got<Dims<64, 256>>>': Linear: the input's last dim is not ...
//
//   constexpr Linear<"fc1", 784, 512> fc1;
//   constexpr Conv2d<"conv1", 1, 8, 5, {.padding = 2}> conv1;
//   auto y = relu(fc1(flatten(x)));
module;
#include "math/elementwise.hpp"
export module teeny.fixed:layers;
import teeny.std;
import teeny.core;
import :name;
import :value;

export namespace teeny::fixed {

using math::UnaryFn;

/// Labels for the shapes in a failed check's message.
template <class D>
struct expected {};
template <class D>
struct got {};

/// True when the input a layer gets has the shape the layer was declared for. Every layer's check
/// is a static_assert on it, so that the compiler's message shows the layer's name and kind, the
/// shape it expects and the shape it got.
template <Name Layer, Name Kind, class Expected, class Got>
inline constexpr bool input_matches = false;
template <Name Layer, Name Kind, class D>
inline constexpr bool input_matches<Layer, Kind, expected<D>, got<D>> = true;

/// A square window of `Span` pixels (dilation included) on an input padded by `Padding` each side.
template <std::int64_t Span, std::int64_t Padding>
struct window {};

/// True when the window fits the padded [N, C, H, W] input at least once, as above.
template <Name Layer, Name Kind, class Got, class Window>
inline constexpr bool window_fits = false;
template <Name Layer, Name Kind, std::int64_t N, std::int64_t C, std::int64_t H, std::int64_t W, std::int64_t Span,
          std::int64_t Padding>
inline constexpr bool window_fits<Layer, Kind, got<Dims<N, C, H, W>>, window<Span, Padding>> =
    H + 2 * Padding >= Span && W + 2 * Padding >= Span;

/// True when both operands of an elementwise op have the same shape.
template <Name Op, class Left, class Right>
inline constexpr bool operands_match = std::is_same_v<Left, Right>;

/// A parameter tensor of a layer, as PyTorch's state_dict holds it.
struct ParamSpec {
  std::string_view key;  // "fc1.weight"
  ConcreteShape shape;
  DType dtype = DType::f32;
};

namespace layer_detail {
// dims with dim `axis` set to `size`.
template <class D>
constexpr auto with_dim(std::size_t axis, std::int64_t size) {
  auto a = D::array;
  a[axis] = size;
  return a;
}
// A window's output extent (PyTorch's floor mode); below 1 when the window does not fit.
constexpr std::int64_t window_out(std::int64_t in, std::int64_t kernel, std::int64_t stride, std::int64_t padding,
                                  std::int64_t dilation) {
  const std::int64_t span = dilation * (kernel - 1) + 1;
  const std::int64_t padded = in + 2 * padding;
  return padded < span ? 0 : (padded - span) / stride + 1;
}
}  // namespace layer_detail

// ---- Linear ----------------------------------------------------------------------------------

struct LinearOptions {
  bool bias = true;
};

/// torch.nn.Linear(In, Out) over the last dim: y = x W^T + b, W [Out, In].
template <Name N, std::int64_t In, std::int64_t Out, LinearOptions O = {}>
  requires(In > 0 && Out > 0)
struct Linear {
  static constexpr auto name = N;
  static constexpr std::string_view kind = "linear";
  static constexpr LayerOp op = LayerOp::linear;
  static constexpr std::int64_t in_features = In;
  static constexpr std::int64_t out_features = Out;
  static constexpr LinearOptions options = O;

  template <class X>
  struct output {
    using element = typename X::element;
    using dims = dims_from<layer_detail::with_dim<typename X::dims>(X::dims::rank - 1, Out)>;
  };

  template <Value X>
    requires(X::dims::rank >= 1)
  constexpr Node<Linear, X> operator()(X) const {
    using want = dims_from<layer_detail::with_dim<typename X::dims>(X::dims::rank - 1, In)>;
    static_assert(input_matches<N, "Linear", fixed::expected<want>, got<typename X::dims>>,
                  "Linear: the input's last dim is not the layer's in_features");
    return {};
  }

  static constexpr auto weight_key = N + ".weight";
  static constexpr auto bias_key = N + ".bias";
  template <Real T>
  static constexpr auto params() {
    if constexpr (O.bias) {
      return std::array<ParamSpec, 2>{
          {{weight_key.view(), {Out, In}, dtype_of<T>}, {bias_key.view(), {Out}, dtype_of<T>}}};
    } else {
      return std::array<ParamSpec, 1>{{{weight_key.view(), {Out, In}, dtype_of<T>}}};
    }
  }
};

// ---- Conv2d ----------------------------------------------------------------------------------

struct Conv2dOptions {
  std::int64_t stride = 1;
  std::int64_t padding = 0;
  std::int64_t dilation = 1;
  std::int64_t groups = 1;
  bool bias = true;
};

/// torch.nn.Conv2d(In, Out, K, stride, padding, dilation, groups, bias) on [N, In, H, W]; weight
/// [Out, In / groups, K, K].
template <Name N, std::int64_t In, std::int64_t Out, std::int64_t K, Conv2dOptions O = {}>
  requires(In > 0 && Out > 0 && K > 0 && O.stride > 0 && O.padding >= 0 && O.dilation > 0 && O.groups > 0 &&
           In % O.groups == 0 && Out % O.groups == 0)
struct Conv2d {
  static constexpr auto name = N;
  static constexpr std::string_view kind = "conv2d";
  static constexpr LayerOp op = LayerOp::conv2d;
  static constexpr std::int64_t in_channels = In;
  static constexpr std::int64_t out_channels = Out;
  static constexpr std::int64_t kernel_size = K;
  static constexpr Conv2dOptions options = O;

  template <class X>
  struct output {
    using element = typename X::element;
    static constexpr std::array<std::int64_t, 4> array{
        X::dims::array[0], Out, layer_detail::window_out(X::dims::array[2], K, O.stride, O.padding, O.dilation),
        layer_detail::window_out(X::dims::array[3], K, O.stride, O.padding, O.dilation)};
    using dims = dims_from<array>;
  };

  template <Value X>
  constexpr Node<Conv2d, X> operator()(X) const {
    static_assert(X::dims::rank == 4, "Conv2d takes a 4-d input [N, C, H, W]");
    if constexpr (X::dims::rank == 4) {
      using want = dims_from<layer_detail::with_dim<typename X::dims>(1, In)>;
      static_assert(input_matches<N, "Conv2d", fixed::expected<want>, got<typename X::dims>>,
                    "Conv2d: the input's channel count (dim 1) is not the layer's in_channels");
      static_assert(window_fits<N, "Conv2d", got<typename X::dims>, window<O.dilation*(K - 1) + 1, O.padding>>,
                    "Conv2d: the kernel (dilated) is larger than the padded input");
    }
    return {};
  }

  static constexpr auto weight_key = N + ".weight";
  static constexpr auto bias_key = N + ".bias";
  template <Real T>
  static constexpr auto params() {
    constexpr ConcreteShape weight{Out, In / O.groups, K, K};
    if constexpr (O.bias) {
      return std::array<ParamSpec, 2>{
          {{weight_key.view(), weight, dtype_of<T>}, {bias_key.view(), {Out}, dtype_of<T>}}};
    } else {
      return std::array<ParamSpec, 1>{{{weight_key.view(), weight, dtype_of<T>}}};
    }
  }
};

// ---- BatchNorm2d -----------------------------------------------------------------------------

struct BatchNormOptions {
  double eps = 1e-5;
};

/// torch.nn.BatchNorm2d(C) in eval mode (running statistics), on [N, C, H, W].
template <Name N, std::int64_t C, BatchNormOptions O = {}>
  requires(C > 0 && O.eps > 0)
struct BatchNorm2d {
  static constexpr auto name = N;
  static constexpr std::string_view kind = "batch_norm";
  static constexpr LayerOp op = LayerOp::batch_norm2d;
  static constexpr std::int64_t num_features = C;
  static constexpr BatchNormOptions options = O;

  template <class X>
  struct output {
    using element = typename X::element;
    using dims = typename X::dims;
  };

  template <Value X>
  constexpr Node<BatchNorm2d, X> operator()(X) const {
    static_assert(X::dims::rank == 4, "BatchNorm2d takes a 4-d input [N, C, H, W]");
    if constexpr (X::dims::rank == 4) {
      using want = dims_from<layer_detail::with_dim<typename X::dims>(1, C)>;
      static_assert(input_matches<N, "BatchNorm2d", fixed::expected<want>, got<typename X::dims>>,
                    "BatchNorm2d: the input's channel count (dim 1) is not the layer's num_features");
    }
    return {};
  }

  static constexpr auto weight_key = N + ".weight";
  static constexpr auto bias_key = N + ".bias";
  static constexpr auto mean_key = N + ".running_mean";
  static constexpr auto var_key = N + ".running_var";
  static constexpr auto count_key = N + ".num_batches_tracked";
  template <Real T>
  static constexpr auto params() {
    return std::array<ParamSpec, 5>{{{weight_key.view(), {C}, dtype_of<T>},
                                     {bias_key.view(), {C}, dtype_of<T>},
                                     {mean_key.view(), {C}, dtype_of<T>},
                                     {var_key.view(), {C}, dtype_of<T>},
                                     {count_key.view(), {}, DType::i64}}};
  }
};

// ---- GroupNorm ------------------------------------------------------------------------------

struct GroupNormOptions {
  double eps = 1e-5;
  bool affine = true;
};

/// torch.nn.GroupNorm(G, C) on [N, C, *]: each sample's C channels in G groups, each group
/// normalised over its channels and the trailing dims; weight and bias [C] when affine.
template <Name N, std::int64_t G, std::int64_t C, GroupNormOptions O = {}>
  requires(G > 0 && C > 0 && C % G == 0 && O.eps > 0)
struct GroupNorm {
  static constexpr auto name = N;
  static constexpr std::string_view kind = "group_norm";
  static constexpr LayerOp op = LayerOp::group_norm;
  static constexpr std::int64_t num_groups = G;
  static constexpr std::int64_t num_channels = C;
  static constexpr GroupNormOptions options = O;

  template <class X>
  struct output {
    using element = typename X::element;
    using dims = typename X::dims;
  };

  template <Value X>
  constexpr Node<GroupNorm, X> operator()(X) const {
    static_assert(X::dims::rank >= 2, "GroupNorm takes an input [N, C, *] of rank 2 or more");
    if constexpr (X::dims::rank >= 2) {
      using want = dims_from<layer_detail::with_dim<typename X::dims>(1, C)>;
      static_assert(input_matches<N, "GroupNorm", fixed::expected<want>, got<typename X::dims>>,
                    "GroupNorm: the input's channel count (dim 1) is not the layer's num_channels");
    }
    return {};
  }

  static constexpr auto weight_key = N + ".weight";
  static constexpr auto bias_key = N + ".bias";
  template <Real T>
  static constexpr auto params() {
    if constexpr (O.affine) {
      return std::array<ParamSpec, 2>{{{weight_key.view(), {C}, dtype_of<T>}, {bias_key.view(), {C}, dtype_of<T>}}};
    } else {
      return std::array<ParamSpec, 0>{};
    }
  }
};

// ---- Activations -----------------------------------------------------------------------------

/// An elementwise activation (torch.nn.ReLU, Sigmoid, Tanh, GELU, SiLU, Hardswish, Hardsigmoid, or
/// any other UnaryFn without attributes): same shape out.
template <UnaryFn F>
struct Activation {
  static constexpr std::string_view kind = "activation";
  static constexpr LayerOp op = LayerOp::activation;
  static constexpr UnaryFn fn = F;

  template <class X>
  struct output {
    using element = typename X::element;
    using dims = typename X::dims;
  };
  template <Value X>
  constexpr Node<Activation, X> operator()(X) const {
    return {};
  }
};
using ReLU = Activation<UnaryFn::relu>;
using Sigmoid = Activation<UnaryFn::sigmoid>;
using Tanh = Activation<UnaryFn::tanh>;
using GELU = Activation<UnaryFn::gelu_erf>;
using SiLU = Activation<UnaryFn::silu>;
using HardSwish = Activation<UnaryFn::hardswish>;
using HardSigmoid = Activation<UnaryFn::hardsigmoid>;

inline constexpr ReLU relu;
inline constexpr Sigmoid sigmoid;
inline constexpr Tanh tanh;
inline constexpr GELU gelu;
inline constexpr SiLU silu;

// ---- Pooling ---------------------------------------------------------------------------------

struct Pool2dOptions {
  std::int64_t stride = 0;  // 0: the kernel size, as in PyTorch
  std::int64_t padding = 0;
};

enum class PoolKind : std::uint8_t { max, average };

/// torch.nn.MaxPool2d(K, stride, padding) / AvgPool2d(K, stride, padding) on [N, C, H, W] (floor
/// mode; the average counts padding, PyTorch's default).
template <PoolKind P, std::int64_t K, Pool2dOptions O = {}>
  requires(K > 0 && O.stride >= 0 && O.padding >= 0 && 2 * O.padding <= K)
struct Pool2d {
  static constexpr std::string_view kind = P == PoolKind::max ? "max_pool2d" : "avg_pool2d";
  static constexpr LayerOp op = P == PoolKind::max ? LayerOp::max_pool2d : LayerOp::avg_pool2d;
  static constexpr PoolKind pool = P;
  static constexpr std::int64_t kernel_size = K;
  static constexpr std::int64_t stride = O.stride == 0 ? K : O.stride;
  static constexpr std::int64_t padding = O.padding;

  template <class X>
  struct output {
    using element = typename X::element;
    static constexpr std::array<std::int64_t, 4> array{
        X::dims::array[0], X::dims::array[1], layer_detail::window_out(X::dims::array[2], K, stride, padding, 1),
        layer_detail::window_out(X::dims::array[3], K, stride, padding, 1)};
    using dims = dims_from<array>;
  };

  template <Value X>
  constexpr Node<Pool2d, X> operator()(X) const {
    static_assert(X::dims::rank == 4, "a 2-d pooling takes a 4-d input [N, C, H, W]");
    if constexpr (X::dims::rank == 4) {
      static_assert(window_fits < "", P == PoolKind::max ? Name("MaxPool2d") : Name("AvgPool2d"), got<typename X::dims>,
                    window < K, padding >>, "a 2-d pooling's window is larger than the padded input");
    }
    return {};
  }
};
template <std::int64_t K, Pool2dOptions O = {}>
using MaxPool2d = Pool2d<PoolKind::max, K, O>;
template <std::int64_t K, Pool2dOptions O = {}>
using AvgPool2d = Pool2d<PoolKind::average, K, O>;

/// torch.nn.AdaptiveAvgPool2d((H, W)) on [N, C, h, w].
template <std::int64_t H, std::int64_t W = H>
  requires(H > 0 && W > 0)
struct AdaptiveAvgPool2d {
  static constexpr std::string_view kind = "adaptive_avg_pool2d";
  static constexpr LayerOp op = LayerOp::adaptive_avg_pool2d;
  static constexpr std::int64_t out_h = H;
  static constexpr std::int64_t out_w = W;

  template <class X>
  struct output {
    using element = typename X::element;
    static constexpr std::array<std::int64_t, 4> array{X::dims::array[0], X::dims::array[1], H, W};
    using dims = dims_from<array>;
  };

  template <Value X>
  constexpr Node<AdaptiveAvgPool2d, X> operator()(X) const {
    static_assert(X::dims::rank == 4, "AdaptiveAvgPool2d takes a 4-d input [N, C, H, W]");
    return {};
  }
};

// ---- Shape -----------------------------------------------------------------------------------

/// torch.flatten(x, 1): [N, d1, d2, ...] -> [N, d1 * d2 * ...].
struct Flatten {
  static constexpr std::string_view kind = "flatten";
  static constexpr LayerOp op = LayerOp::flatten;

  template <class X>
  struct output {
    using element = typename X::element;
    static constexpr std::array<std::int64_t, 2> array{X::dims::array[0], X::dims::numel / X::dims::array[0]};
    using dims = dims_from<array>;
  };
  template <Value X>
    requires(X::dims::rank >= 1)
  constexpr Node<Flatten, X> operator()(X) const {
    return {};
  }
};
inline constexpr Flatten flatten;

// ---- Elementwise binary ----------------------------------------------------------------------

/// a + b of two values of one shape and element type (no broadcasting): ResNet's residual sum.
template <Name N = "add">
struct Add {
  static constexpr auto name = N;
  static constexpr std::string_view kind = "add";
  static constexpr LayerOp op = LayerOp::add;

  template <class A, class B>
  struct output {
    using element = typename A::element;
    using dims = typename A::dims;
  };
  template <Value A, Value B>
  constexpr Node<Add, A, B> operator()(A, B) const {
    static_assert(operands_match<N, typename A::dims, typename B::dims>,
                  "add: the operands' shapes differ (no broadcasting)");
    static_assert(std::is_same_v<typename A::element, typename B::element>, "add: the operands' element types differ");
    return {};
  }
};

/// a + b (see Add); `add<"layer1.0.add">(a, b)` names the node.
template <Name N = "add", Value A, Value B>
constexpr auto add(A a, B b) {
  return Add<N>{}(a, b);
}

// ---- Composition -----------------------------------------------------------------------------

/// torch.nn.Sequential: the layers applied in turn. A Sequential is not a node: calling it gives
/// the chain of its layers' nodes.
template <class... Layers>
  requires(sizeof...(Layers) > 0)
struct Sequential {
  template <Value X>
  constexpr auto operator()(X x) const {
    return apply<Layers...>(x);
  }

 private:
  template <class First, class... Rest, Value X>
  static constexpr auto apply(X x) {
    if constexpr (sizeof...(Rest) == 0) {
      return First{}(x);
    } else {
      return apply<Rest...>(First{}(x));
    }
  }
};

}  // namespace teeny::fixed
