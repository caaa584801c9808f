// teeny.runtime — from a lowered graph to a running model: the standard lowering, memory planning,
// what a backend may offer (:backend), the loaded model (execution plans over any backend that has
// a kernel for every op; its plans are built in :plan and, in training builds, its backward half
// is :training) and load_cpu, which loads one on the CPU backend.
export module teeny.runtime;
import teeny.std;
export import :memory_plan;
export import :backend;
export import :standard_lowering;
export import :loaded_model;
export import :plan;
#if TEENY_TRAINING
export import :training;
#endif
export import :cpu_model;
