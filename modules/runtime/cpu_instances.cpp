// The standard CPU models' code, instantiated once for the library (teeny.runtime:cpu_model declares these
// instantiations extern, so that programs importing teeny do not compile them again).
import teeny.core;
import teeny.graph;
import teeny.io;
import teeny.ops;
import teeny.cpu;
import teeny.runtime;

namespace teeny {
template class LoadedModel<CpuContext, standard_ops<float>>;
template class LoadedModel<CpuContext, standard_ops<double>>;
template Result<CpuModelOf<float>> load_cpu<float>(const Graph&, const Bindings&, CpuOptions, const ParamSource*);
template Result<CpuModelOf<double>> load_cpu<double>(const Graph&, const Bindings&, CpuOptions, const ParamSource*);
#if TEENY_TRAINING
template Result<CpuModelOf<float>> load_cpu_for_training<float>(const Graph&, const Bindings&, CpuOptions);
template Result<CpuModelOf<double>> load_cpu_for_training<double>(const Graph&, const Bindings&, CpuOptions);
#endif
}  // namespace teeny
