// teeny.cuda:cuda_model — run-time graphs on a GPU: load_cuda lowers a graph and loads it as a
// LoadedModel over the CUDA backend, as load_cpu does on the CPU.
//
//   auto model = teeny::cuda::load_cuda(graph, {{"batch", 64}});          // Result<CudaModel>
//   model->load_weights(*SafetensorsFile::open("mlp.safetensors"));         // uploaded once
//   model->forward(inputs);                        // host tensors in, copied to the device
//   model->copy_output("logits", std::as_writable_bytes(std::span(logits)));  // waits, copies out
//   model->set_graph_replay(true);                 // later forwards: one CUDA graph launch
//
// (Training builds: load_cuda_for_training, the same for a model lowered for training.)
export module teeny.cuda:cuda_model;
import teeny.std;
import teeny.core;
import teeny.graph;
import teeny.model;
import teeny.ops;
import teeny.runtime;
import :context;

export namespace teeny::cuda {

/// A model loaded on a GPU with the standard ops computing in T (f32, f64, f16 or bf16).
template <FloatElement T>
using CudaModelOf = LoadedModel<CudaContext, standard_ops<T>>;
/// A model loaded on a GPU with the standard f32 ops.
using CudaModel = CudaModelOf<float>;

/// Lowers `graph` for inference with `lowering` and loads it on CUDA device `options.device` for
/// the sizes in `dims`: parameters and the activation arena in device memory, every launch
/// prepared. Fails, saying why, where there is no GPU (a build without CUDA, no driver, no
/// device) and for ops without CUDA kernels (user ops: planned).
template <Lowering L>
Result<LoadedModel<CudaContext, typename L::op_set>> load_cuda(const Graph& graph, const L& lowering,
                                                               const Bindings& dims, CudaOptions options = {}) {
  if constexpr (!compiled_in) {
    // Said without instantiating the model: a build without CUDA does not compile it (minutes).
    return not_compiled_in(cat("selecting CUDA device ", options.device));
  } else {
    auto lowered = lowering.lower(graph, LoweringMode::inference);
    if (!lowered) return std::move(lowered).error();
    auto cuda = CudaContext::create(options);
    if (!cuda) return std::move(cuda).error();
    return LoadedModel<CudaContext, typename L::op_set>::load(graph, std::move(*lowered), std::move(*cuda), dims);
  }
}

/// The lowering load_cuda uses by default: the standard lowering without its max-pool fold. A
/// convolution with a max pool folded in runs teeny's direct kernel, which makes each pooled value
/// from the convolutions of its window (recomputing those that overlapping windows share); kept
/// apart, the convolution goes to cuDNN and the pool to its own kernel.
template <FloatElement T>
using cuda_lowering =
    graph_lowering<fuse_activations<fold_residual_add<fold_batch_norm<standard_node_lowering<T, standard_ops<T>>>>>>;
static_assert(Lowering<cuda_lowering<float>>);

/// Lowers `graph` with cuda_lowering<T> and loads it on a GPU.
template <FloatElement T = float>
Result<CudaModelOf<T>> load_cuda(const Graph& graph, const Bindings& dims, CudaOptions options = {}) {
  return load_cuda(graph, cuda_lowering<T>{}, dims, options);
}

#if TEENY_TRAINING
/// Lowers `graph` for training and loads it on a GPU: forward keeps what backward reads, backward
/// runs the CUDA backward kernels, and the trained parameters' gradients live in device memory
/// (copy_gradient reads one, device_parameter_gradients gives them all). teeny.train's device
/// optimizers (teeny::cuda::Sgd, Adam, AdamW) step them there, and its device losses
/// (CrossEntropyLoss, MseLoss) write dL/d(output) in place; a loss computed on the host hands its
/// gradient over with set_output_grad.
template <Lowering L>
Result<LoadedModel<CudaContext, typename L::op_set>> load_cuda_for_training(const Graph& graph, const L& lowering,
                                                                            const Bindings& dims,
                                                                            CudaOptions options = {}) {
  if constexpr (!compiled_in) {
    return not_compiled_in(cat("selecting CUDA device ", options.device));  // as load_cuda
  } else {
    auto lowered = lowering.lower(graph, LoweringMode::training);
    if (!lowered) return std::move(lowered).error();
    auto cuda = CudaContext::create(options);
    if (!cuda) return std::move(cuda).error();
    return LoadedModel<CudaContext, typename L::op_set>::load(graph, std::move(*lowered), std::move(*cuda), dims);
  }
}
template <FloatElement T = float>
Result<CudaModelOf<T>> load_cuda_for_training(const Graph& graph, const Bindings& dims, CudaOptions options = {}) {
  return load_cuda_for_training(graph, standard_lowering<T>{}, dims, options);
}
#endif

}  // namespace teeny::cuda

// In a build with CUDA, the CUDA models are instantiated once, in the library
// (cuda/cuda_instances.cpp), not in every program that loads one. Without CUDA they only ever fail
// to load, and the library does not spend minutes compiling them.
#if TEENY_HAS_CUDA
namespace teeny {
extern template class LoadedModel<cuda::CudaContext, standard_ops<float>>;
extern template class LoadedModel<cuda::CudaContext, standard_ops<double>>;
extern template class LoadedModel<cuda::CudaContext, standard_ops<f16>>;
extern template class LoadedModel<cuda::CudaContext, standard_ops<bf16>>;
}  // namespace teeny
namespace teeny::cuda {
extern template Result<CudaModelOf<float>> load_cuda<float>(const Graph&, const Bindings&, CudaOptions);
extern template Result<CudaModelOf<double>> load_cuda<double>(const Graph&, const Bindings&, CudaOptions);
extern template Result<CudaModelOf<f16>> load_cuda<f16>(const Graph&, const Bindings&, CudaOptions);
extern template Result<CudaModelOf<bf16>> load_cuda<bf16>(const Graph&, const Bindings&, CudaOptions);
}  // namespace teeny::cuda
#endif
namespace teeny::cuda {

// The CUDA backend runs every op of the standard set in every dtype (LoadedModel checks the whole
// set), owns its memory (and copies within it: inputs on the device), captures graphs and reports
// failed launches; its models are teeny::Models.
static_assert(DeviceMemoryBackend<CudaContext> && DeviceCopyBackend<CudaContext> &&
              DeviceTrainingBackend<CudaContext> && GraphBackend<CudaContext> && ReportsRunErrors<CudaContext>);
static_assert(Model<CudaModel> && Model<CudaModelOf<bf16>>);
}  // namespace teeny::cuda
