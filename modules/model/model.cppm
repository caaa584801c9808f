// teeny.model — the seed's abstractions as C++20 concepts: RuntimeOp (with its customization
// points), ExecutableOp and op sets (extend_ops adds the user's ops, checked), Lowering, Model,
// ArgVisitor and, in training builds, BackwardOp. See docs/architecture.md for the seed -> C++ mapping.
export module teeny.model;
import teeny.std;
export import :launch;
export import :args;
export import :runtime_op;
export import :executable_op;
export import :lowering;
export import :model_concept;
export import :op_checks;
#if TEENY_TRAINING
export import :backward_op;
#endif
