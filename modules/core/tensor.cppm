// teeny.core:tensor — typed non-owning views and owning, aligned storage.
//
//   auto t = Tensor::from<float>({1, 2, 3, 4, 5, 6}, {2, 3});   // Result<Tensor>
//   auto v = t->view<float>();                                   // Result<TensorView<float>>
//   (*v)(1, 2) == 6;  v->numel() == 6;
//   t->view<double>()  -> error "tensor is f32 but was viewed as f64"
module;
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <span>
#include <utility>
export module teeny.core:tensor;
import :dtype;
import :error;
import :shape;

export namespace teeny {

/// A strided view of elements of type T owned elsewhere. Trivially copyable (a kernel argument).
template <Element T>
struct TensorView {
  T* data = nullptr;
  ConcreteShape shape;
  ConcreteShape strides;  // in elements

  constexpr TensorView() = default;
  constexpr TensorView(T* d, const ConcreteShape& s) : data(d), shape(s), strides(contiguous_strides(s)) {}
  constexpr TensorView(T* d, const ConcreteShape& s, const ConcreteShape& st) : data(d), shape(s), strides(st) {}
  /// A view of mutable elements is also a view of const elements.
  template <class U>
    requires std::same_as<T, const U>
  constexpr TensorView(const TensorView<U>& other)  // NOLINT: implicit like T* -> const T*
      : data(other.data), shape(other.shape), strides(other.strides) {}

  constexpr std::size_t rank() const { return shape.rank(); }
  constexpr std::int64_t numel() const { return shape.numel(); }
  constexpr bool is_contiguous() const { return strides == contiguous_strides(shape); }
  /// The elements in memory order; only meaningful for a contiguous view.
  constexpr std::span<T> span() const { return {data, static_cast<std::size_t>(numel())}; }
  /// Element at a multi-index (one index per dim).
  template <std::integral... I>
  constexpr T& operator()(I... index) const {
    std::int64_t offset = 0;
    std::size_t axis = 0;
    ((offset += static_cast<std::int64_t>(index) * strides[axis++]), ...);
    return data[offset];
  }
};

namespace tensor_detail {
struct AlignedFree {
  void operator()(std::byte* p) const { ::operator delete(p, std::align_val_t{64}); }
};
}  // namespace tensor_detail

/// Owning, zero-initialised, 64-byte-aligned bytes (a cache line and an AVX-512 vector).
class Buffer {
 public:
  static constexpr std::size_t alignment = 64;

  Buffer() = default;
  static Result<Buffer> allocate(std::size_t bytes) {
    Buffer b;
    if (bytes == 0) return b;
    void* p = ::operator new(bytes, std::align_val_t{alignment}, std::nothrow);
    if (p == nullptr) return fail(Errc::out_of_memory, "cannot allocate ", bytes, " bytes");
    std::memset(p, 0, bytes);
    b.data_.reset(static_cast<std::byte*>(p));
    b.size_ = bytes;
    return b;
  }
  std::byte* data() { return data_.get(); }
  const std::byte* data() const { return data_.get(); }
  std::size_t size() const { return size_; }

 private:
  std::unique_ptr<std::byte, tensor_detail::AlignedFree> data_;
  std::size_t size_ = 0;
};

/// An owning, contiguous tensor of any dtype.
class Tensor {
 public:
  Tensor() = default;

  static Result<Tensor> zeros(DType dtype, const ConcreteShape& shape) {
    if (shape.numel() < 0) return fail(Errc::invalid_argument, "negative dim in shape ", shape);
    auto buffer = Buffer::allocate(static_cast<std::size_t>(shape.numel()) * size_of(dtype));
    if (!buffer) return std::move(buffer).error().context(cat("tensor ", dtype, " ", shape));
    Tensor t;
    t.buffer_ = std::move(*buffer);
    t.dtype_ = dtype;
    t.shape_ = shape;
    return t;
  }

  /// Copies `values` into a new tensor of `shape`; their count must match.
  template <Element T>
  static Result<Tensor> from(std::span<const T> values, const ConcreteShape& shape) {
    if (static_cast<std::int64_t>(values.size()) != shape.numel()) {
      return fail(Errc::shape_mismatch, values.size(), " values do not fill shape ", shape, " (", shape.numel(),
                  " elements)");
    }
    auto t = zeros(dtype_of<T>, shape);
    if (t && !values.empty()) std::memcpy(t->buffer_.data(), values.data(), values.size_bytes());
    return t;
  }
  template <Element T>
  static Result<Tensor> from(std::initializer_list<T> values, const ConcreteShape& shape) {
    return from(std::span<const T>(values.begin(), values.size()), shape);
  }

  DType dtype() const { return dtype_; }
  const ConcreteShape& shape() const { return shape_; }
  std::int64_t numel() const { return shape_.numel(); }
  std::size_t bytes() const { return buffer_.size(); }
  std::byte* data() { return buffer_.data(); }
  const std::byte* data() const { return buffer_.data(); }

  template <Element T>
  Result<TensorView<T>> view() {
    if (dtype_of<T> != dtype_) return wrong_dtype(dtype_of<T>);
    return TensorView<T>(reinterpret_cast<T*>(buffer_.data()), shape_);
  }
  template <Element T>
  Result<TensorView<const T>> view() const {
    if (dtype_of<T> != dtype_) return wrong_dtype(dtype_of<T>);
    return TensorView<const T>(reinterpret_cast<const T*>(buffer_.data()), shape_);
  }

 private:
  Error wrong_dtype(DType asked) const {
    return fail(Errc::dtype_mismatch, "tensor ", shape_, " is ", dtype_, " but was viewed as ", asked);
  }
  Buffer buffer_;
  DType dtype_ = DType::f32;
  ConcreteShape shape_;
};

}  // namespace teeny
