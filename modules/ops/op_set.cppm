// teeny.ops:op_set — the standard op set: every executable op teeny ships, for element type T.
// It is the single list of ops; a backend must implement each (its kernels are checked against it).
export module teeny.ops:op_set;
import teeny.std;
import teeny.core;
import teeny.model;
import :linear;
import :elementwise;
import :shape;
import :conv;
import :pool;
import :norm;
import :reduce;
import :sequence;

export namespace teeny {

template <FloatElement T>
using standard_ops =
    OpSet<InputOp, weight_op<T>, linear_op<T>, matmul_op<T>, unary_op<T>, binary_op<T>, reshape_op<T>, conv_op<T>,
          max_pool2d_op<T>, avg_pool2d_op<T>, adaptive_avg_pool2d_op<T>, batch_norm_op<T>, layer_norm_op<T>,
          rms_norm_op<T>, group_norm_op<T>, softmax_op<T>, reduce_op<T>, permute_op<T>, slice_op<T>, concat_op<T>,
          pad_op<T>, upsample_op<T>, cast_op<T>, embedding_op<T>, attention_op<T>, dropout_op<T>, nll_loss_op<T>,
          arg_reduce_op<T>, cumsum_op<T>, hardmax_op<T>, compare_op<T>, where_op<T>>;

}  // namespace teeny
