// teeny.ops — the standard executable ops, each a RuntimeOp with typed kernel arguments, and the
// standard op set. Kernels live with the backends (modules/cpu, kernels/); the per-element math
// both share is kernels/math/.
export module teeny.ops;
import teeny.std;
export import :common;
export import :linear;
export import :elementwise;
export import :shape;
export import :conv;
export import :pool;
export import :norm;
export import :reduce;
export import :sequence;
export import :op_set;
