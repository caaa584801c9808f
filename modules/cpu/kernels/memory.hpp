// Where the CPU backend's long-lived buffers come from: packed weights, kernels' per-layer
// constants, per-worker scratch and GEMM workspaces, the thread pool itself. All of them are taken
// when a model is loaded, none while it runs. By default they come from the heap; a typed model
// (teeny.fixed) hands the backend a block of its own (MemoryBlock), so that loading allocates
// nothing from the heap, as embedded programs need.
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace teeny::cpu {

/// Every piece is 64-byte aligned; allocate returns nullptr when it cannot (it never throws).
class Memory {
 public:
  static constexpr std::size_t alignment = 64;
  virtual void* allocate(std::size_t bytes) = 0;
  /// Gives back a piece allocate returned (nullptr: nothing).
  virtual void release(void* piece) = 0;

 protected:
  Memory() = default;
  ~Memory() = default;
  Memory(const Memory&) = default;
  Memory& operator=(const Memory&) = default;
};

/// The heap (64-byte aligned operator new, nothrow). One object for the whole program.
Memory& heap_memory();

/// A caller's block, handed out front to back in 64-byte aligned pieces. Releasing the last piece
/// handed out takes it back; releasing any other keeps its bytes in use until the block is reset
/// (the backend takes its pieces at load and gives them back only when the model goes away).
class MemoryBlock final : public Memory {
 public:
  MemoryBlock(void* data, std::size_t bytes);
  void* allocate(std::size_t bytes) override;
  void release(void* piece) override;

  std::size_t capacity() const { return end_ - begin_; }
  /// Bytes in use now, alignment padding included.
  std::size_t used() const { return top_ - begin_; }
  /// The most that was ever in use, including a request that did not fit: what the block needs.
  std::size_t needed() const { return needed_; }

 private:
  std::size_t begin_;  // addresses, as integers: the block may be empty
  std::size_t end_;
  std::size_t top_;
  std::size_t last_ = 0;  // where the last piece handed out starts (0: none)
  std::size_t needed_ = 0;
};

/// An array of n T in a Memory's piece, value-initialised, destroyed and given back with the
/// array; move-only. Check ok(): false when the memory had no room for the n asked for.
template <class T>
class MemoryArray {
 public:
  MemoryArray() = default;
  MemoryArray(Memory& memory, std::size_t n) : memory_(&memory) {
    if (n == 0) return;
    void* piece = n <= static_cast<std::size_t>(-1) / sizeof(T) ? memory.allocate(n * sizeof(T)) : nullptr;
    if (piece == nullptr) {
      failed_ = true;
      return;
    }
    data_ = static_cast<T*>(piece);
    for (; size_ < n; ++size_) ::new (static_cast<void*>(data_ + size_)) T();
  }
  MemoryArray(MemoryArray&& other) noexcept
      : memory_(other.memory_),
        data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)),
        failed_(std::exchange(other.failed_, false)) {}
  MemoryArray& operator=(MemoryArray&& other) noexcept {
    if (this != &other) {
      reset();
      memory_ = other.memory_;
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
      failed_ = std::exchange(other.failed_, false);
    }
    return *this;
  }
  MemoryArray(const MemoryArray&) = delete;
  MemoryArray& operator=(const MemoryArray&) = delete;
  ~MemoryArray() { reset(); }

  bool ok() const { return !failed_; }
  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](std::size_t i) { return data_[i]; }
  const T& operator[](std::size_t i) const { return data_[i]; }
  T* begin() { return data_; }
  T* end() { return data_ + size_; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }

 private:
  void reset() {
    if (data_ == nullptr) return;
    if constexpr (!std::is_trivially_destructible_v<T>) {
      for (std::size_t i = size_; i-- > 0;) data_[i].~T();
    }
    memory_->release(data_);
    data_ = nullptr;
    size_ = 0;
  }
  Memory* memory_ = nullptr;
  T* data_ = nullptr;
  std::size_t size_ = 0;
  bool failed_ = false;
};

}  // namespace teeny::cpu
