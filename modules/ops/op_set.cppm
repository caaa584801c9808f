// teeny.ops:op_set — the standard op set: every executable op teeny ships, for element type T.
// It is the single list of ops; a backend must implement each (its kernels are checked against it).
export module teeny.ops:op_set;
import teeny.core;
import teeny.model;
import :linear;
import :elementwise;
import :shape;

export namespace teeny {

template <FloatElement T>
using standard_ops = OpSet<InputOp, linear_op<T>, matmul_op<T>, unary_op<T>, binary_op<T>, reshape_op<T>>;

}  // namespace teeny
