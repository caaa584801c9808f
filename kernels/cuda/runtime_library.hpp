#pragma once
// A library loaded at run time (cuBLASLt, cuDNN): opened with dlopen by its soname, each entry
// point resolved with dlsym, and the reason when either fails, kept for the library's status
// strings. Never closed once loaded: handles and plans may outlive any one user of it. Internal to
// kernels/cuda (blas.cu, dnn.cu).
#include <dlfcn.h>

#include <cstdio>
#include <new>

namespace teeny::cuda_kernels {

class RuntimeLibrary {
 public:
  /// Opens `soname` through the loader's path (LD_LIBRARY_PATH, the ld cache); `name` is what the
  /// failure text calls it ("cuBLASLt").
  RuntimeLibrary(const char* soname, const char* name) noexcept : soname_(soname), name_(name) {
    std::snprintf(not_loaded_, sizeof not_loaded_, "teeny: %s not loaded", name);
    handle_ = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) {
      char what[160];
      std::snprintf(what, sizeof what, "%s: cannot be loaded", soname);
      note_failure(what);
    }
  }

  bool is_open() const noexcept { return handle_ != nullptr; }

  /// Points `fn` at entry point `symbol`; on failure notes why, and the caller gives up.
  template <class F>
  bool resolve(const char* symbol, F& fn) noexcept {
    if (handle_ == nullptr) return false;
    (void)dlerror();  // clear any earlier error, so the one reported is this lookup's
    void* address = dlsym(handle_, symbol);
    if (address == nullptr) {
      char what[192];
      std::snprintf(what, sizeof what, "%s: undefined symbol: %s", soname_, symbol);
      note_failure(what);
      return false;
    }
    fn = reinterpret_cast<F>(address);
    return true;
  }

  /// Closes a library that is missing an entry point: half a library is no library.
  void close() noexcept {
    if (handle_ != nullptr) dlclose(handle_);
    handle_ = nullptr;
  }

  /// Why the library did not load (dlerror's text), or "".
  const char* why() const noexcept { return why_; }
  /// "teeny: cuBLASLt not loaded (why)": the text of a not-loaded status.
  const char* not_loaded() const noexcept { return not_loaded_; }

 private:
  void note_failure(const char* fallback) noexcept {
    const char* error = dlerror();
    std::snprintf(why_, sizeof why_, "%s", error != nullptr ? error : fallback);
    std::snprintf(not_loaded_, sizeof not_loaded_, "teeny: %s not loaded (%s)", name_, why_);
  }

  const char* soname_;
  const char* name_;
  void* handle_ = nullptr;
  char why_[512] = "";
  char not_loaded_[600] = "";
};

/// A library handle made by `create(&handle)` (cublasLtCreate, cudnnCreate) into `out`, null on
/// failure: the library's status (0 on success).
template <class Handle, class Create>
int make_handle(void*& out, Create&& create) noexcept {
  out = nullptr;
  Handle handle = nullptr;
  const int status = static_cast<int>(create(&handle));
  if (status == 0) out = handle;
  return status;
}

/// A new Plan filled by `build(plan)` into `out`, null (and nothing left allocated) on failure:
/// build's status, or `no_memory` when the plan cannot be allocated.
template <class Plan, class Build>
int make_plan(void*& out, int no_memory, Build&& build) noexcept {
  out = nullptr;
  Plan* plan = new (std::nothrow) Plan;
  if (plan == nullptr) return no_memory;
  if (const int status = build(*plan); status != 0) {
    delete plan;
    return status;
  }
  out = plan;
  return 0;
}

}  // namespace teeny::cuda_kernels
