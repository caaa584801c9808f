// teeny.onnx:converters — the one list of the ONNX default-domain ops teeny imports, each with
// its converter. docs/onnx-conformance.md's list of supported ops is generated from it.
export module teeny.onnx:converters;
import teeny.std;
import teeny.core;
import teeny.graph;
import :context;
import :ops_conv;
import :ops_elementwise;
import :ops_folded;
import :ops_layers;
import :ops_resize;
import :ops_shape;

export namespace teeny::onnx {

/// Converts one ONNX node into teeny graph ops (or an import-time constant).
using ConvertFn = Result<void> (*)(NodeContext&);

struct Converter {
  std::string_view op_type;
  ConvertFn convert;
};

/// The default domain's ops teeny imports (every opset, unless the converter refuses an attribute
/// or input form, or an older opset's semantics, with a reason).
inline constexpr Converter standard_converters[] = {
    // activations and elementwise math
    {"Relu", convert::unary<ReLU>},
    {"Sigmoid", convert::unary<Sigmoid>},
    {"Tanh", convert::unary<Tanh>},
    {"HardSwish", convert::unary<Hardswish>},
    {"HardSigmoid", convert::hard_sigmoid},
    {"LeakyRelu", convert::leaky_relu},
    {"ThresholdedRelu", convert::thresholded_relu},
    {"Shrink", convert::shrink},
    {"Elu", convert::elu},
    {"Softplus", convert::softplus},
    {"Selu", convert::selu},
    {"Celu", convert::celu},
    {"Softsign", convert::softsign},
    {"PRelu", convert::prelu},
    {"Gelu", convert::gelu},
    {"Exp", convert::unary_math<UnaryOp::exp>},
    {"Log", convert::unary_math<UnaryOp::log>},
    {"Sqrt", convert::unary_math<UnaryOp::sqrt>},
    {"Abs", convert::unary_math<UnaryOp::abs>},
    {"Neg", convert::unary_math<UnaryOp::neg>},
    {"Reciprocal", convert::unary_math<UnaryOp::reciprocal>},
    {"Erf", convert::unary_math<UnaryOp::erf>},
    {"Sin", convert::unary_math<UnaryOp::sin>},
    {"Cos", convert::unary_math<UnaryOp::cos>},
    {"Tan", convert::unary_math<UnaryOp::tan>},
    {"Asin", convert::unary_math<UnaryOp::asin>},
    {"Acos", convert::unary_math<UnaryOp::acos>},
    {"Atan", convert::unary_math<UnaryOp::atan>},
    {"Sinh", convert::unary_math<UnaryOp::sinh>},
    {"Cosh", convert::unary_math<UnaryOp::cosh>},
    {"Asinh", convert::unary_math<UnaryOp::asinh>},
    {"Acosh", convert::unary_math<UnaryOp::acosh>},
    {"Atanh", convert::unary_math<UnaryOp::atanh>},
    {"Floor", convert::unary_math<UnaryOp::floor>},
    {"Ceil", convert::unary_math<UnaryOp::ceil>},
    {"Round", convert::unary_math<UnaryOp::round>},
    {"Sign", convert::unary_math<UnaryOp::sign>},
    {"Add", convert::binary<BinaryOp::add>},
    {"Sub", convert::binary<BinaryOp::sub>},
    {"Mul", convert::binary<BinaryOp::mul>},
    {"Div", convert::binary<BinaryOp::div>},
    {"Pow", convert::pow},
    {"Max", convert::binary<BinaryOp::maximum>},
    {"Min", convert::binary<BinaryOp::minimum>},
    {"Mod", convert::mod},
    {"Sum", convert::binary<BinaryOp::add>},
    {"Mean", convert::mean},
    {"Identity", convert::identity},
    {"Dropout", convert::identity},
    {"Cast", convert::cast<false>},
    {"CastLike", convert::cast<true>},
    {"Clip", convert::clip},
    {"Expand", convert::expand},
    {"Tile", convert::tile},
    // layers
    {"Gemm", convert::gemm},
    {"MatMul", convert::matmul},
    {"Conv", convert::conv},
    {"ConvTranspose", convert::conv_transpose},
    {"MaxPool", convert::pool<true>},
    {"AveragePool", convert::pool<false>},
    {"GlobalAveragePool", convert::global_pool<false>},
    {"GlobalMaxPool", convert::global_pool<true>},
    {"BatchNormalization", convert::batch_norm},
    {"LayerNormalization", convert::layer_norm},
    {"InstanceNormalization", convert::instance_norm},
    {"Softmax", convert::softmax<Softmax>},
    {"LogSoftmax", convert::softmax<LogSoftmax>},
    {"Hardmax", convert::softmax<Hardmax>},
    {"CumSum", convert::cumsum},
    {"ReduceSum", convert::reduce<ReduceOp::sum>},
    {"ReduceMean", convert::reduce<ReduceOp::mean>},
    {"ReduceMax", convert::reduce<ReduceOp::max>},
    {"ReduceMin", convert::reduce<ReduceOp::max, true>},
    {"ReduceSumSquare", convert::reduce_composed<convert::Composed::sum_square>},
    {"ReduceL1", convert::reduce_composed<convert::Composed::l1>},
    {"ReduceL2", convert::reduce_composed<convert::Composed::l2>},
    {"ReduceLogSum", convert::reduce_composed<convert::Composed::log_sum>},
    {"ReduceLogSumExp", convert::reduce_composed<convert::Composed::log_sum_exp>},
    {"ReduceProd", convert::reduce<ReduceOp::prod>},
    {"ArgMax", convert::arg_reduce<ArgOp::max>},
    {"ArgMin", convert::arg_reduce<ArgOp::min>},
    {"NegativeLogLikelihoodLoss", convert::nll_loss},
    {"SoftmaxCrossEntropyLoss", convert::softmax_cross_entropy},
    // shapes and constants
    {"Constant", convert::constant},
    {"Shape", convert::shape},
    {"Size", convert::size},
    {"Reshape", convert::reshape},
    {"Flatten", convert::flatten},
    {"Squeeze", convert::squeeze<false>},
    {"Unsqueeze", convert::squeeze<true>},
    {"Transpose", convert::transpose},
    {"Concat", convert::concat},
    {"Gather", convert::gather},
    {"Slice", convert::slice},
    {"Split", convert::split},
    {"Pad", convert::pad},
    {"Resize", convert::resize},
    {"Upsample", convert::resize},
    {"DepthToSpace", convert::depth_space<true>},
    {"SpaceToDepth", convert::depth_space<false>},
    // computed at import only (shape computations)
    {"Equal", convert::compare<convert::Compare::equal>},
    {"Less", convert::compare<convert::Compare::less>},
    {"Greater", convert::compare<convert::Compare::greater>},
    {"LessOrEqual", convert::compare<convert::Compare::less_equal>},
    {"GreaterOrEqual", convert::compare<convert::Compare::greater_equal>},
    {"Not", convert::logical_not},
    {"Where", convert::where},
    {"ConstantOfShape", convert::constant_of_shape},
    {"Range", convert::range},
};

/// The converter of a default-domain op, or nullptr.
inline ConvertFn find_converter(std::string_view op_type) {
  for (const Converter& c : standard_converters) {
    if (c.op_type == op_type) return c.convert;
  }
  return nullptr;
}

}  // namespace teeny::onnx
