// teeny.cuda — the CUDA backend: devices and device memory (:device), the seed's launch path
// (:launch), which packs an op's typed Args into its kernel's parameters and launches it at its
// per-dtype entry point, the backend a LoadedModel runs on (:context: device plan, CUDA graphs)
// and load_cuda (:cuda_model). Every op of the standard set has its kernels, and in training builds its
// backward kernels (docs/cuda.md). Training builds add teeny.train's optimizers (:optimizer) and
// losses (:loss) on the device, and a whole training step replayed as one graph (:training_step).
export module teeny.cuda;
import teeny.std;
export import :device;
export import :launch;
export import :blas;
export import :dnn;
export import :context;
export import :cuda_model;
#if TEENY_TRAINING
export import :optimizer;
export import :loss;
export import :training_step;
#endif
