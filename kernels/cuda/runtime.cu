#include <cuda_runtime.h>

#include <cstring>

#include "cuda/registry.hpp"
#include "cuda/runtime.hpp"

namespace teeny::cuda_kernels {

int device_count(int& count) noexcept {
  count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    count = 0;
    (void)cudaGetLastError();  // clear the sticky error so later calls start clean
  }
  return static_cast<int>(e);
}

const char* error_name(int code) noexcept { return cudaGetErrorName(static_cast<cudaError_t>(code)); }
const char* error_string(int code) noexcept { return cudaGetErrorString(static_cast<cudaError_t>(code)); }

int device_properties(int index, char* name, std::size_t name_capacity, int& major, int& minor,
                      std::size_t& total_memory) noexcept {
  cudaDeviceProp prop{};
  const cudaError_t e = cudaGetDeviceProperties(&prop, index);
  if (e != cudaSuccess) return static_cast<int>(e);
  if (name_capacity > 0) {
    std::strncpy(name, prop.name, name_capacity - 1);
    name[name_capacity - 1] = '\0';
  }
  major = prop.major;
  minor = prop.minor;
  total_memory = prop.totalGlobalMem;
  return 0;
}

int device_allocate(void*& pointer, std::size_t bytes) noexcept {
  pointer = nullptr;
  return static_cast<int>(cudaMalloc(&pointer, bytes));
}
int device_free(void* pointer) noexcept { return static_cast<int>(cudaFree(pointer)); }
int copy_to_device(void* device, const void* host, std::size_t bytes) noexcept {
  return static_cast<int>(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice));
}
int copy_to_host(void* host, const void* device, std::size_t bytes) noexcept {
  return static_cast<int>(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost));
}
int synchronize() noexcept { return static_cast<int>(cudaDeviceSynchronize()); }
int set_device(int index) noexcept { return static_cast<int>(cudaSetDevice(index)); }

int copy_to_device_async(void* device, const void* host, std::size_t bytes, void* stream) noexcept {
  return static_cast<int>(
      cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, static_cast<cudaStream_t>(stream)));
}
int copy_to_host_async(void* host, const void* device, std::size_t bytes, void* stream) noexcept {
  return static_cast<int>(
      cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, static_cast<cudaStream_t>(stream)));
}
int copy_on_device_async(void* to, const void* from, std::size_t bytes, void* stream) noexcept {
  return static_cast<int>(
      cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream)));
}
int zero_async(void* device, std::size_t bytes, void* stream) noexcept {
  return static_cast<int>(cudaMemsetAsync(device, 0, bytes, static_cast<cudaStream_t>(stream)));
}
int pinned_allocate(void*& pointer, std::size_t bytes) noexcept {
  pointer = nullptr;
  return static_cast<int>(cudaMallocHost(&pointer, bytes));
}
int pinned_free(void* pointer) noexcept { return static_cast<int>(cudaFreeHost(pointer)); }

int stream_create(void*& stream) noexcept {
  cudaStream_t s = nullptr;
  const cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  stream = s;
  return static_cast<int>(e);
}
int stream_destroy(void* stream) noexcept {
  return static_cast<int>(cudaStreamDestroy(static_cast<cudaStream_t>(stream)));
}
int stream_synchronize(void* stream) noexcept {
  return static_cast<int>(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
}
int event_create(void*& event) noexcept {
  cudaEvent_t ev = nullptr;
  const cudaError_t e = cudaEventCreate(&ev);
  event = ev;
  return static_cast<int>(e);
}
int event_destroy(void* event) noexcept { return static_cast<int>(cudaEventDestroy(static_cast<cudaEvent_t>(event))); }
int event_record(void* event, void* stream) noexcept {
  return static_cast<int>(cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)));
}
int event_synchronize(void* event) noexcept {
  return static_cast<int>(cudaEventSynchronize(static_cast<cudaEvent_t>(event)));
}
int event_elapsed_ms(float& milliseconds, void* start, void* end) noexcept {
  return static_cast<int>(
      cudaEventElapsedTime(&milliseconds, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(end)));
}

int stream_begin_capture(void* stream) noexcept {
  // Thread-local: only this thread's unsafe calls (a cudaMalloc mid-capture) invalidate it.
  return static_cast<int>(cudaStreamBeginCapture(static_cast<cudaStream_t>(stream), cudaStreamCaptureModeThreadLocal));
}
int stream_end_capture(void* stream, void*& graph) noexcept {
  cudaGraph_t g = nullptr;
  const cudaError_t e = cudaStreamEndCapture(static_cast<cudaStream_t>(stream), &g);
  graph = g;
  return static_cast<int>(e);
}
int graph_instantiate(void*& executable, void* graph) noexcept {
  cudaGraphExec_t exec = nullptr;
  const cudaError_t e = cudaGraphInstantiate(&exec, static_cast<cudaGraph_t>(graph), 0);
  executable = exec;
  return static_cast<int>(e);
}
int graph_launch(void* executable, void* stream) noexcept {
  return static_cast<int>(cudaGraphLaunch(static_cast<cudaGraphExec_t>(executable), static_cast<cudaStream_t>(stream)));
}
int graph_destroy(void* graph) noexcept { return static_cast<int>(cudaGraphDestroy(static_cast<cudaGraph_t>(graph))); }
int graph_executable_destroy(void* executable) noexcept {
  return static_cast<int>(cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(executable)));
}

namespace {
// Every family's entry points, in one list (kernel_count / kernel_name index it).
const KernelTable* families(std::size_t& count) noexcept {
  static const KernelTable tables[] = {elementwise_kernels(), shape_kernels(),  pool_kernels(), reduce_kernels(),
                                       norm_kernels(),        linear_kernels(), conv_kernels(), sequence_kernels(),
                                       optimizer_kernels(),   loss_kernels()};
  count = sizeof tables / sizeof tables[0];
  return tables;
}
const KernelEntry* entry_at(std::size_t index) noexcept {
  std::size_t count = 0;
  const KernelTable* tables = families(count);
  for (std::size_t f = 0; f < count; ++f) {
    if (index < tables[f].count) return &tables[f].entries[index];
    index -= tables[f].count;
  }
  return nullptr;
}
}  // namespace

std::size_t kernel_count() noexcept {
  std::size_t count = 0;
  const KernelTable* tables = families(count);
  std::size_t total = 0;
  for (std::size_t f = 0; f < count; ++f) total += tables[f].count;
  return total;
}

const char* kernel_name(std::size_t index) noexcept {
  const KernelEntry* e = entry_at(index);
  return e == nullptr ? nullptr : e->name;
}

const void* find_kernel(const char* name) noexcept {
  for (std::size_t i = 0; const KernelEntry* e = entry_at(i); ++i) {
    if (std::strcmp(e->name, name) == 0) return e->kernel;
  }
  return nullptr;
}

int launch_kernel(const void* kernel, Extent grid, Extent block, void** params, std::size_t shared_bytes,
                  void* stream) noexcept {
  const cudaError_t e = cudaLaunchKernel(kernel, dim3(grid.x, grid.y, grid.z), dim3(block.x, block.y, block.z), params,
                                         shared_bytes, static_cast<cudaStream_t>(stream));
  if (e != cudaSuccess) (void)cudaGetLastError();  // a launch error is not sticky: clear it for the next launch
  return static_cast<int>(e);
}

}  // namespace teeny::cuda_kernels
