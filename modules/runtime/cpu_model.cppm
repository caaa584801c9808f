// teeny.runtime:cpu_model — run-time graphs on the CPU: load_cpu lowers a graph and loads it as a
// LoadedModel over the CPU backend (teeny.cpu), which has a kernel for every standard op.
//
//   auto model = load_cpu(graph, {{"batch", 64}}, {.threads = 2});   // Result<CpuModel>
//   auto exact = load_cpu<double>(graph, {{"batch", 64}});              // f64: Result<CpuModelOf<double>>
export module teeny.runtime:cpu_model;
import teeny.std;
import teeny.core;
import teeny.graph;
import teeny.model;
import teeny.ops;
import teeny.cpu;
import :standard_lowering;
import :loaded_model;
import :plan;
#if TEENY_TRAINING
import :training;
#endif

export namespace teeny {

/// A model loaded on the CPU with the standard ops computing in T: float (fast) or double (exact
/// checks; its GEMMs are portable, not vectorised).
template <CpuReal T>
using CpuModelOf = LoadedModel<CpuContext, standard_ops<T>>;
/// A model loaded on the CPU with the standard f32 ops.
using CpuModel = CpuModelOf<float>;

/// A CPU context for `options`, or the error that it could not be made (no memory for its pool).
inline Result<CpuContext> make_cpu_context(CpuOptions options) {
  CpuContext cpu(options);
  if (!cpu.ok()) return fail(Errc::out_of_memory, "cannot allocate the CPU backend's thread pool");
  return cpu;
}

/// Lowers `graph` with `lowering` (any Lowering: the standard one, or the standard one extended
/// with the user's ops and middlewares) and loads it on the CPU for the sizes in `dims`. Every op
/// of the lowering's op set needs a CPU kernel (a compile-time check names the one that has none).
/// With `weights`, the parameters are loaded from them (strictly) before the kernels pack them: one
/// packing instead of two for load_cpu then load_weights.
template <Lowering L>
Result<LoadedModel<CpuContext, typename L::op_set>> load_cpu(const Graph& graph, const L& lowering,
                                                             const Bindings& dims, CpuOptions options = {},
                                                             const ParamSource* weights = nullptr) {
  auto lowered = lowering.lower(graph, LoweringMode::inference);
  if (!lowered) return std::move(lowered).error();
  auto cpu = make_cpu_context(options);
  if (!cpu) return std::move(cpu).error();
  return LoadedModel<CpuContext, typename L::op_set>::load(graph, std::move(*lowered), std::move(*cpu), dims, weights);
}

/// Lowers `graph` with the standard lowering for element type T and loads it on the CPU for the
/// sizes in `dims` (with `weights`, as above). The graph's values must be of that dtype (Cast
/// converts).
template <CpuReal T = float>
Result<CpuModelOf<T>> load_cpu(const Graph& graph, const Bindings& dims, CpuOptions options = {},
                               const ParamSource* weights = nullptr) {
  return load_cpu(graph, standard_lowering<T>{}, dims, options, weights);
}

#if TEENY_TRAINING
/// Lowers `graph` for training (BatchNorms on batch statistics, dropouts active, no folds) and
/// loads it on the CPU for the sizes in `dims`: the model runs forward, backward() and hands its
/// parameters and gradients to an optimizer. It starts in the training phase.
/// T = double gives exact gradients for checks against finite differences. The first overload
/// takes any Lowering, as load_cpu does.
template <Lowering L>
Result<LoadedModel<CpuContext, typename L::op_set>> load_cpu_for_training(const Graph& graph, const L& lowering,
                                                                          const Bindings& dims,
                                                                          CpuOptions options = {}) {
  auto lowered = lowering.lower(graph, LoweringMode::training);
  if (!lowered) return std::move(lowered).error();
  auto cpu = make_cpu_context(options);
  if (!cpu) return std::move(cpu).error();
  return LoadedModel<CpuContext, typename L::op_set>::load(graph, std::move(*lowered), std::move(*cpu), dims);
}
template <CpuReal T = float>
Result<CpuModelOf<T>> load_cpu_for_training(const Graph& graph, const Bindings& dims, CpuOptions options = {}) {
  return load_cpu_for_training(graph, standard_lowering<T>{}, dims, options);
}
#endif
}  // namespace teeny

// The standard CPU models are instantiated once, in the library (runtime/cpu_instances.cpp), not in every
// program that loads one: they are most of such a program's compile time.
namespace teeny {
extern template class LoadedModel<CpuContext, standard_ops<float>>;
extern template class LoadedModel<CpuContext, standard_ops<double>>;
extern template Result<CpuModelOf<float>> load_cpu<float>(const Graph&, const Bindings&, CpuOptions,
                                                          const ParamSource*);
extern template Result<CpuModelOf<double>> load_cpu<double>(const Graph&, const Bindings&, CpuOptions,
                                                            const ParamSource*);
#if TEENY_TRAINING
extern template Result<CpuModelOf<float>> load_cpu_for_training<float>(const Graph&, const Bindings&, CpuOptions);
extern template Result<CpuModelOf<double>> load_cpu_for_training<double>(const Graph&, const Bindings&, CpuOptions);
#endif
}  // namespace teeny

// Models loaded on the CPU are teeny::Models. Checking that instantiates LoadedModel over the CPU,
// whose runs_op_set assert checks that the CPU has a kernel for every standard op in f32 and f64
// and, in training builds, a backward kernel for every op that has a backward.
namespace teeny {
static_assert(Model<CpuModel>, "a model loaded on the CPU is a teeny::Model");
static_assert(Model<CpuModelOf<double>>);
#if TEENY_TRAINING
// Kernels whose prepared state is derived from parameter values refresh it after an optimizer step.
static_assert(RefreshableKernel<CpuContext, linear_op<float>, LinearState>);
static_assert(RefreshableKernel<CpuContext, linear_op<double>, LinearState>);
static_assert(RefreshableKernel<CpuContext, conv_op<float>, ConvState>);
static_assert(RefreshableKernel<CpuContext, conv_op<double>, ConvStateOf<double>>);
static_assert(RefreshableKernel<CpuContext, batch_norm_op<float>, BatchNormState>);
static_assert(RefreshableKernel<CpuContext, batch_norm_op<double>, BatchNormStateOf<double>>);
#endif
}  // namespace teeny
