// The standard CUDA models' code, instantiated once for the library (teeny.cuda:cuda_model declares
// these instantiations extern, so that programs importing teeny do not compile them again).
import teeny.core;
import teeny.graph;
import teeny.ops;
import teeny.runtime;
import teeny.cuda;

namespace teeny {
template class LoadedModel<cuda::CudaContext, standard_ops<float>>;
template class LoadedModel<cuda::CudaContext, standard_ops<double>>;
template class LoadedModel<cuda::CudaContext, standard_ops<f16>>;
template class LoadedModel<cuda::CudaContext, standard_ops<bf16>>;
}  // namespace teeny
namespace teeny::cuda {
template Result<CudaModelOf<float>> load_cuda<float>(const Graph&, const Bindings&, CudaOptions);
template Result<CudaModelOf<double>> load_cuda<double>(const Graph&, const Bindings&, CudaOptions);
template Result<CudaModelOf<f16>> load_cuda<f16>(const Graph&, const Bindings&, CudaOptions);
template Result<CudaModelOf<bf16>> load_cuda<bf16>(const Graph&, const Bindings&, CudaOptions);
}  // namespace teeny::cuda
