// teeny.cpu — the CPU backend: a context (thread pool, memory) and one kernel per standard op,
// found by an execution plan as prepare_kernel(op, args, CpuContext&) / run_kernel(op, args,
// state, CpuContext&). teeny.runtime loads run-time graphs on it (load_cpu); teeny.fixed runs typed
// models on it. An embedded build (TEENY_EMBEDDED) has the kernels typed models use.
export module teeny.cpu;
import teeny.std;
export import :context;
export import :elementwise;
export import :linear;
export import :conv;
export import :pool;
export import :norm;
#if !TEENY_EMBEDDED
export import :shape;
export import :reduce;
export import :sequence;
#endif
