// teeny.runtime — from a lowered graph to a running model: the standard lowering, memory planning,
// the loaded model (execution plans over any backend that has a kernel for every op) and
// load_cpu, which loads one on the CPU backend.
export module teeny.runtime;
export import :memory_plan;
export import :standard_lowering;
export import :loaded_model;
export import :cpu;
