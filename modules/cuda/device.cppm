// teeny.cuda:device — CUDA devices, device memory, streams and events, with CUDA's errors as
// teeny errors; Owned, the owner of each CUDA object teeny makes.
//
//   auto n = teeny::cuda::device_count();            // 0 (not an error) on a machine without a GPU
//   auto buffer = teeny::cuda::DeviceBuffer::allocate(bytes);
//   if (buffer) buffer->upload(host_bytes);
//   auto stream = teeny::cuda::Stream::create();    // launches on it run in order, apart from others
//
// A build without CUDA (-Dcuda=disabled, or no nvcc) keeps this API: every call that needs a GPU
// returns an `unsupported` error that says so.
module;
#include "cuda/runtime.hpp"
export module teeny.cuda:device;
import teeny.std;
import teeny.core;

export namespace teeny::cuda {

/// Whether this build of teeny has its CUDA kernels (nvcc was found and -Dcuda was not disabled).
#if TEENY_HAS_CUDA
inline constexpr bool compiled_in = true;
#else
inline constexpr bool compiled_in = false;
#endif

/// A CUDA error code as a teeny error: "<what>: cudaErrorNoDevice: no CUDA-capable device is detected".
inline Error cuda_error(int code, std::string_view what) {
#if TEENY_HAS_CUDA
  return Error(Errc::device, cat(what, ": ", cuda_kernels::error_name(code), ": ", cuda_kernels::error_string(code)));
#else
  return Error(Errc::device, cat(what, ": CUDA error ", code));
#endif
}

/// The error every GPU call returns in a build without CUDA.
inline Error not_compiled_in(std::string_view what) {
  return Error(Errc::unsupported, cat(what, ": teeny was built without CUDA (-Dcuda=disabled, or nvcc not found)"));
}

/// Usable CUDA devices; 0 where there is no GPU or no driver (that is not an error: callers skip).
inline int device_count() {
#if TEENY_HAS_CUDA
  int count = 0;
  (void)cuda_kernels::device_count(count);
  return count;
#else
  return 0;
#endif
}

/// Why there is no usable device ("cudaErrorNoDevice: no CUDA-capable device is detected"), or
/// an empty string when there is one.
inline std::string no_device_reason() {
#if TEENY_HAS_CUDA
  int count = 0;
  const int code = cuda_kernels::device_count(count);
  if (code != 0) return cat(cuda_kernels::error_name(code), ": ", cuda_kernels::error_string(code));
  return count == 0 ? "the CUDA runtime reports no devices" : "";
#else
  return "teeny was built without CUDA";
#endif
}

struct DeviceInfo {
  int index = 0;
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  std::size_t memory_bytes = 0;
};

inline Result<DeviceInfo> device_info(int index) {
#if TEENY_HAS_CUDA
  DeviceInfo info{index, "", 0, 0, 0};
  char name[256] = {};
  if (const int code = cuda_kernels::device_properties(index, name, sizeof name, info.compute_major, info.compute_minor,
                                                       info.memory_bytes)) {
    return cuda_error(code, cat("properties of CUDA device ", index));
  }
  info.name = name;
  return info;
#else
  return not_compiled_in(cat("properties of CUDA device ", index));
#endif
}

/// An object of the CUDA runtime or of a CUDA library (a stream, an event, a graph, a handle, a
/// plan) owned by one value: moved, never copied, and given to `release` when that value goes.
/// Where the object is made, the call that makes it writes slot().
template <void (*release)(void*) noexcept>
class Owned {
 public:
  Owned() = default;
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  Owned(Owned&& other) noexcept : object_(std::exchange(other.object_, nullptr)) {}
  Owned& operator=(Owned&& other) noexcept {
    if (this != &other) {
      reset();
      object_ = std::exchange(other.object_, nullptr);
    }
    return *this;
  }
  ~Owned() { reset(); }

  void* get() const { return object_; }
  /// Where a create, plan or capture call writes the object it makes (one held now is released).
  void*& slot() {
    reset();
    return object_;
  }

 private:
  void reset() noexcept {
    if (object_ != nullptr) release(object_);
    object_ = nullptr;
  }
  void* object_ = nullptr;
};

// How Owned releases each kind of object (a build without CUDA never makes one).
#if TEENY_HAS_CUDA
inline void destroy_stream(void* stream) noexcept { (void)cuda_kernels::stream_destroy(stream); }
inline void destroy_event(void* event) noexcept { (void)cuda_kernels::event_destroy(event); }
#else
inline void destroy_stream(void* /*stream*/) noexcept {}
inline void destroy_event(void* /*event*/) noexcept {}
#endif

/// Device memory owned by one object (cudaMalloc at creation, cudaFree at destruction).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      release();
      data_ = std::exchange(other.data_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  ~DeviceBuffer() { release(); }

  static Result<DeviceBuffer> allocate(std::size_t bytes) {
#if TEENY_HAS_CUDA
    DeviceBuffer buffer;
    if (bytes == 0) return buffer;
    if (const int code = cuda_kernels::device_allocate(buffer.data_, bytes)) {
      return cuda_error(code, cat("allocating ", bytes, " bytes of device memory"));
    }
    buffer.bytes_ = bytes;
    return buffer;
#else
    return not_compiled_in(cat("allocating ", bytes, " bytes of device memory"));
#endif
  }

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

  /// Copies `host` to the start of the buffer (synchronously).
  Result<void> upload(std::span<const std::byte> host) {
    if (host.size() > bytes_) {
      return fail(Errc::out_of_range, "uploading ", host.size(), " bytes into a device buffer of ", bytes_);
    }
#if TEENY_HAS_CUDA
    if (host.empty()) return ok();
    if (const int code = cuda_kernels::copy_to_device(data_, host.data(), host.size())) {
      return cuda_error(code, cat("copying ", host.size(), " bytes to the device"));
    }
    return ok();
#else
    return not_compiled_in("copying to the device");
#endif
  }

  /// Copies the start of the buffer into `host` (synchronously: it waits for the work before it).
  Result<void> download(std::span<std::byte> host) const {
    if (host.size() > bytes_) {
      return fail(Errc::out_of_range, "downloading ", host.size(), " bytes from a device buffer of ", bytes_);
    }
#if TEENY_HAS_CUDA
    if (host.empty()) return ok();
    if (const int code = cuda_kernels::copy_to_host(host.data(), data_, host.size())) {
      return cuda_error(code, cat("copying ", host.size(), " bytes from the device"));
    }
    return ok();
#else
    return not_compiled_in("copying from the device");
#endif
  }

 private:
  void release() {
#if TEENY_HAS_CUDA
    if (data_ != nullptr) (void)cuda_kernels::device_free(data_);
#endif
    data_ = nullptr;
    bytes_ = 0;
  }

  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

/// A CUDA stream owned by one object: kernels launched on it run in order, and apart from other
/// streams' (it does not wait on the default stream).
class Stream {
 public:
  static Result<Stream> create() {
#if TEENY_HAS_CUDA
    Stream stream;
    if (const int code = cuda_kernels::stream_create(stream.handle_.slot())) {
      return cuda_error(code, "creating a CUDA stream");
    }
    return stream;
#else
    return not_compiled_in("creating a CUDA stream");
#endif
  }

  /// What `launch` takes (nullptr for a default-constructed Stream: the default stream).
  void* handle() const { return handle_.get(); }

  /// Waits for the work queued on this stream; a kernel's asynchronous failure surfaces here.
  Result<void> synchronize() const {
#if TEENY_HAS_CUDA
    if (const int code = cuda_kernels::stream_synchronize(handle_.get()))
      return cuda_error(code, "waiting for a CUDA stream");
    return ok();
#else
    return not_compiled_in("waiting for a CUDA stream");
#endif
  }

 private:
  Owned<destroy_stream> handle_;
};

/// A CUDA event owned by one object: recorded on a stream, it marks a point in that stream's
/// work; two of them time the work between.
class Event {
 public:
  static Result<Event> create() {
#if TEENY_HAS_CUDA
    Event event;
    if (const int code = cuda_kernels::event_create(event.handle_.slot())) {
      return cuda_error(code, "creating a CUDA event");
    }
    return event;
#else
    return not_compiled_in("creating a CUDA event");
#endif
  }

  /// Marks the current end of `stream`'s queued work.
  Result<void> record(const Stream& stream) {
#if TEENY_HAS_CUDA
    if (const int code = cuda_kernels::event_record(handle_.get(), stream.handle())) {
      return cuda_error(code, "recording a CUDA event");
    }
    return ok();
#else
    (void)stream;
    return not_compiled_in("recording a CUDA event");
#endif
  }

  /// Milliseconds of GPU time from `start` to `end`, once `end` has been reached.
  static Result<float> elapsed_ms(const Event& start, const Event& end) {
#if TEENY_HAS_CUDA
    if (const int code = cuda_kernels::event_synchronize(end.handle_.get()))
      return cuda_error(code, "waiting for a CUDA event");
    float ms = 0;
    if (const int code = cuda_kernels::event_elapsed_ms(ms, start.handle_.get(), end.handle_.get())) {
      return cuda_error(code, "timing two CUDA events");
    }
    return ms;
#else
    (void)start;
    (void)end;
    return not_compiled_in("timing two CUDA events");
#endif
  }

 private:
  Owned<destroy_event> handle_;
};

/// Waits for all work on the device; a kernel's asynchronous failure surfaces here.
inline Result<void> synchronize(std::string_view what) {
#if TEENY_HAS_CUDA
  if (const int code = cuda_kernels::synchronize()) return cuda_error(code, what);
  return ok();
#else
  return not_compiled_in(what);
#endif
}

/// Copies `host.size()` bytes of device memory at `device` (any device pointer: a DeviceBuffer's,
/// a model's device_parameter_gradients()) to the host, after the work queued before it.
inline Result<void> copy_to_host(std::span<std::byte> host, const void* device) {
#if TEENY_HAS_CUDA
  if (const int code = cuda_kernels::copy_to_host(host.data(), device, host.size())) {
    return cuda_error(code, cat("copying ", host.size(), " bytes from a CUDA device"));
  }
  return ok();
#else
  (void)device;
  return not_compiled_in(cat("copying ", host.size(), " bytes from a CUDA device"));
#endif
}

}  // namespace teeny::cuda
