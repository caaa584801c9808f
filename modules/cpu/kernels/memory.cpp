#include "memory.hpp"

#include <cstdint>
#include <new>

namespace teeny::cpu {

namespace {

class HeapMemory final : public Memory {
 public:
  void* allocate(std::size_t bytes) override {
    // A piece of 0 bytes is still a distinct piece, so that callers can tell it from failure.
    return ::operator new(bytes == 0 ? 1 : bytes, std::align_val_t{alignment}, std::nothrow);
  }
  void release(void* piece) override {
    if (piece != nullptr) ::operator delete(piece, std::align_val_t{alignment});
  }
};

constexpr std::size_t align_up(std::size_t x) { return (x + (Memory::alignment - 1)) & ~(Memory::alignment - 1); }

}  // namespace

Memory& heap_memory() {
  static HeapMemory heap;
  return heap;
}

MemoryBlock::MemoryBlock(void* data, std::size_t bytes)
    : begin_(reinterpret_cast<std::uintptr_t>(data)), end_(begin_ + bytes), top_(begin_) {}

void* MemoryBlock::allocate(std::size_t bytes) {
  const std::size_t start = align_up(top_);
  const std::size_t size = bytes == 0 ? 1 : bytes;
  // What the block would need for this piece, counted even when it does not fit.
  const bool fits = start >= top_ && start <= end_ && size <= end_ - start;
  const std::size_t want = start - begin_ + size;
  if (want > needed_) needed_ = want;
  if (!fits || begin_ == 0) return nullptr;
  last_ = start;
  top_ = start + size;
  // The block keeps addresses as integers (it may be empty, begin_ == 0).
  return reinterpret_cast<void*>(start);  // NOLINT(performance-no-int-to-ptr)
}

void MemoryBlock::release(void* piece) {
  const auto at = reinterpret_cast<std::uintptr_t>(piece);
  if (piece == nullptr || at != last_) return;
  top_ = last_;
  last_ = 0;
}

}  // namespace teeny::cpu
