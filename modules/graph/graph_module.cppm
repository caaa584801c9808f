// teeny.graph — the run-time graph IR: graph ops with typed PyTorch attributes (one std::variant,
// GraphOp), shape and dtype inference with symbolic dims, the validated Graph, and GraphBuilder.
//
//   import teeny.graph;
//   GraphBuilder b;
//   Value x = b.input("x", DType::f32, {Dim::sym("batch"), 1, 28, 28});
//   Value h = b.relu(b.conv2d(x, 32, 5, {.padding = 2}).named("conv1"));   // f32[batch, 32, 28, 28]
//   h = b.flatten(b.max_pool2d(h, 2));                                      // f32[batch, 6272]
//   b.output("logits", b.linear(h, 10).named("fc"));
//   Result<Graph> g = std::move(b).build();
//   g->parameters();   // conv1.weight [32, 1, 5, 5], conv1.bias [32], fc.weight [10, 6272], fc.bias [10]
//
// Partitions: tensor_type (TensorType, ParamSpec, Arity, Size2), concepts (GraphOpType and the
// customization points params_of, kind), rules (the checks the families share), ops_<family> (the
// op structs of one family: linear, elementwise, shape, conv, pool, norm, reduce, sequence; the
// same families as teeny.ops and teeny.cpu), custom_op (CustomOp, for ops defined outside teeny),
// op (GraphOp and its visitors), graph (Graph), builder (GraphBuilder, Value; builder_ops defines
// its op methods).
export module teeny.graph;
import teeny.std;
export import teeny.core;
export import :tensor_type;
export import :concepts;
export import :rules;  // exports nothing; every interface partition must be reachable from here
export import :ops_linear;
export import :ops_elementwise;
export import :ops_shape;
export import :ops_conv;
export import :ops_pool;
export import :ops_norm;
export import :ops_reduce;
export import :ops_sequence;
export import :custom_op;
export import :op;
export import :graph;
export import :builder;
