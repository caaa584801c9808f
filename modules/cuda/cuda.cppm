// teeny.cuda — the CUDA backend: devices and device memory (:device) and the seed's launch path
// (:launch), which packs an op's typed Args into its kernel's parameters and launches it at its
// per-dtype entry point. Every forward op but dropout has its kernels; the device execution plan,
// load_cuda and CUDA graphs are planned (docs/cuda.md).
export module teeny.cuda;
export import :device;
export import :launch;
