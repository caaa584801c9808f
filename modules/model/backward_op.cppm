// teeny.model:backward_op — (training builds only) the backward half of an executable op.
//
// Compiled only with -Dtraining=true (TEENY_TRAINING). In the seed every backward method had a
// silent default, so an op without a gradient just stopped it; here an op has a backward only
// if it satisfies BackwardOp, and a training load refuses a parameter-to-loss path through an op
// that does not.
export module teeny.model:backward_op;
import teeny.std;
import teeny.core;
import :launch;
import :args;
import :runtime_op;

export namespace teeny {

/// A RuntimeOp with a backward kernel: it packs typed backward arguments (forward inputs, params
/// and output from the activation cache, dL/dy, and the dL/dx, dL/dw buffers to write) and says
/// its backward grid.
template <class Op>
concept BackwardOp = RuntimeOp<Op> && ArgPack<typename Op::BackwardArgs> &&
                     requires(const Op& op, const BackwardBindings& bindings,
                              std::span<const ConcreteShape> input_shapes, const ConcreteShape& output_shape) {
                       { op.pack_backward_args(bindings) } -> std::same_as<Result<typename Op::BackwardArgs>>;
                       { op.backward_grid(input_shapes, output_shape) } -> std::same_as<Dim3>;
                     };

namespace backward_detail {
template <class Op>
concept HasHasBackward = requires(const Op& op) {
  { op.has_backward() } -> std::convertible_to<bool>;
};
template <class Op>
concept HasParamTrainable = requires(const Op& op, std::size_t i) {
  { op.param_trainable(i) } -> std::convertible_to<bool>;
};
template <class Op>
concept HasGradRowStride = requires(const Op& op, const ConcreteShape& s) {
  { op.backward_grad_output_row_stride(s) } -> std::convertible_to<std::int64_t>;
};
template <class Op>
concept HasBackwardBlock = requires(const Op& op) {
  { op.backward_block() } -> std::same_as<Dim3>;
};
template <class Op>
concept HasBackwardLaunches = requires(const Op& op) {
  { op.n_backward_launches() } -> std::convertible_to<std::size_t>;
};
template <class Op>
concept HasPackBackwardForLaunch = requires(const Op& op, std::size_t i, const BackwardBindings& b) {
  { op.pack_backward_args_for_launch(i, b) } -> std::same_as<Result<typename Op::BackwardArgs>>;
};
template <class Op>
concept HasBackwardGridForLaunch =
    requires(const Op& op, std::size_t i, std::span<const ConcreteShape> in, const ConcreteShape& s) {
      { op.backward_grid_for_launch(i, in, s) } -> std::same_as<Dim3>;
    };

struct has_backward_fn {
  // The seed defaulted to false because Rust cannot ask whether an impl exists; C++ can, so an
  // op without the member has a backward exactly when it satisfies BackwardOp.
  template <RuntimeOp Op>
  constexpr bool operator()(const Op& op) const {
    if constexpr (HasHasBackward<Op>) {
      return op.has_backward();
    } else {
      return BackwardOp<Op>;
    }
  }
};
struct param_trainable_fn {
  // Not in the seed, whose parameters all trained: a BatchNorm's running statistics are buffers.
  template <RuntimeOp Op>
  constexpr bool operator()(const Op& op, std::size_t param_index) const {
    if constexpr (HasParamTrainable<Op>) {
      return op.param_trainable(param_index);
    } else {
      return is_floating(param_dtype(op, param_index));
    }
  }
};
struct backward_grad_output_row_stride_fn {
  template <BackwardOp Op>
  constexpr std::int64_t operator()(const Op& op, const ConcreteShape& output_shape) const {
    if constexpr (HasGradRowStride<Op>) {
      return op.backward_grad_output_row_stride(output_shape);
    } else {
      return output_shape.last();
    }
  }
};
struct backward_block_fn {
  template <BackwardOp Op>
  constexpr Dim3 operator()(const Op& op) const {
    if constexpr (HasBackwardBlock<Op>) {
      return op.backward_block();
    } else {
      return Dim3{128, 1, 1};
    }
  }
};
struct n_backward_launches_fn {
  template <BackwardOp Op>
  constexpr std::size_t operator()(const Op& op) const {
    if constexpr (HasBackwardLaunches<Op>) {
      return op.n_backward_launches();
    } else {
      return 1;
    }
  }
};
struct pack_backward_args_for_launch_fn {
  template <BackwardOp Op>
  Result<typename Op::BackwardArgs> operator()(const Op& op, std::size_t launch, const BackwardBindings& b) const {
    if constexpr (HasPackBackwardForLaunch<Op>) {
      return op.pack_backward_args_for_launch(launch, b);
    } else {
      return op.pack_backward_args(b);
    }
  }
};
struct backward_grid_for_launch_fn {
  template <BackwardOp Op>
  constexpr Dim3 operator()(const Op& op, std::size_t launch, std::span<const ConcreteShape> input_shapes,
                            const ConcreteShape& output_shape) const {
    if constexpr (HasBackwardGridForLaunch<Op>) {
      return op.backward_grid_for_launch(launch, input_shapes, output_shape);
    } else {
      return op.backward_grid(input_shapes, output_shape);
    }
  }
};
}  // namespace backward_detail

/// Whether the op has a backward kernel. Default: whether it satisfies BackwardOp.
inline constexpr backward_detail::has_backward_fn has_backward{};
/// Whether parameter slot `i` is trained (gets a gradient and optimizer updates) rather than a
/// buffer. Default: every floating-point slot.
inline constexpr backward_detail::param_trainable_fn param_trainable{};
/// Row stride (elements) of the dL/dy buffer. Default: the last dim.
inline constexpr backward_detail::backward_grad_output_row_stride_fn backward_grad_output_row_stride{};
/// Threads per block of the backward kernel. Default: (128, 1, 1).
inline constexpr backward_detail::backward_block_fn backward_block{};
/// Sequential backward launches (e.g. a concat writes one dL/dx per input). Default: 1.
inline constexpr backward_detail::n_backward_launches_fn n_backward_launches{};
/// Backward arguments of launch `i`. Default: pack_backward_args.
inline constexpr backward_detail::pack_backward_args_for_launch_fn pack_backward_args_for_launch{};
/// Backward grid of launch `i`. Default: backward_grid.
inline constexpr backward_detail::backward_grid_for_launch_fn backward_grid_for_launch{};

}  // namespace teeny
