#pragma once
// Plain C++ view of the nvcc-built CUDA runtime helpers: no CUDA types here, so module code
// compiled by clang can call into them. Every function reports failure as a CUDA error code
// (0 = success) and never throws. A stream is passed as `void*` (nullptr: the default stream).
#include <cstddef>
#include <cstdint>

namespace teeny::cuda_kernels {

/// Number of usable CUDA devices in `count`; returns the CUDA error code (0 when fine).
int device_count(int& count) noexcept;

/// The CUDA name and description of an error code ("cudaErrorNoDevice: no CUDA-capable device ...").
const char* error_name(int code) noexcept;
const char* error_string(int code) noexcept;

/// Device name and compute capability of device `index`.
int device_properties(int index, char* name, std::size_t name_capacity, int& major, int& minor,
                      std::size_t& total_memory) noexcept;

/// Device memory: cudaMalloc / cudaFree, and copies between host and device memory.
int device_allocate(void*& pointer, std::size_t bytes) noexcept;
int device_free(void* pointer) noexcept;
int copy_to_device(void* device, const void* host, std::size_t bytes) noexcept;
int copy_to_host(void* host, const void* device, std::size_t bytes) noexcept;
int synchronize() noexcept;
/// Makes device `index` the calling thread's current device (cudaSetDevice).
int set_device(int index) noexcept;

/// Copies queued on `stream`. From pageable host memory the call returns once the bytes are
/// staged, so the caller may reuse them; to the host it returns at once: wait on the stream.
int copy_to_device_async(void* device, const void* host, std::size_t bytes, void* stream) noexcept;
int copy_to_host_async(void* host, const void* device, std::size_t bytes, void* stream) noexcept;
int copy_on_device_async(void* to, const void* from, std::size_t bytes, void* stream) noexcept;

/// Sets `bytes` of device memory to zero, queued on `stream`.
int zero_async(void* device, std::size_t bytes, void* stream) noexcept;

/// Pinned (page-locked) host memory, which the GPU copies from and to directly.
int pinned_allocate(void*& pointer, std::size_t bytes) noexcept;
int pinned_free(void* pointer) noexcept;

/// Streams (created non-blocking: they do not wait on the default stream) and events (for timing).
int stream_create(void*& stream) noexcept;
int stream_destroy(void* stream) noexcept;
int stream_synchronize(void* stream) noexcept;
int event_create(void*& event) noexcept;
int event_destroy(void* event) noexcept;
int event_record(void* event, void* stream) noexcept;
int event_synchronize(void* event) noexcept;
int event_elapsed_ms(float& milliseconds, void* start, void* end) noexcept;

/// CUDA graphs: the work queued on `stream` between begin and end is recorded (not run) as a graph,
/// instantiated into an executable graph that graph_launch replays on a stream.
int stream_begin_capture(void* stream) noexcept;
int stream_end_capture(void* stream, void*& graph) noexcept;
int graph_instantiate(void*& executable, void* graph) noexcept;
int graph_launch(void* executable, void* stream) noexcept;
int graph_destroy(void* graph) noexcept;
int graph_executable_destroy(void* executable) noexcept;

/// Launch extents, as CUDA's dim3.
struct Extent {
  std::uint32_t x = 1;
  std::uint32_t y = 1;
  std::uint32_t z = 1;
};

/// A compiled kernel entry point by name ("teeny_unary_f32"): the handle `launch_kernel` takes,
/// or nullptr when no kernel has that name.
const void* find_kernel(const char* name) noexcept;

/// Every kernel entry point teeny's CUDA kernels register, for listing and tests.
std::size_t kernel_count() noexcept;
const char* kernel_name(std::size_t index) noexcept;

/// cudaLaunchKernel: `params[i]` points at parameter i's bytes (in the kernel's parameter order).
/// Returns the launch's error code, or the error left by the previous asynchronous work.
int launch_kernel(const void* kernel, Extent grid, Extent block, void** params, std::size_t shared_bytes,
                  void* stream) noexcept;

}  // namespace teeny::cuda_kernels
