// teeny.core:tensor — the tensor types a user of teeny holds, all in one place:
//
//   TensorView<T>  a typed, strided view of elements owned elsewhere (kernel arguments, outputs)
//   Buffer         owning, zeroed, 64-byte-aligned bytes
//   Tensor         an owning, contiguous tensor of any dtype
//   NamedTensor    a Tensor with a name (what the Model concept's forward takes and returns)
//   TensorRef      a borrowed, named tensor: dtype, shape and bytes (model inputs, weights, saving)
//   TensorBinding  a tensor as an execution plan binds it: untyped pointer, dtype, shape, row stride
//
//   auto t = Tensor::from<float>({1, 2, 3, 4, 5, 6}, {2, 3});   // Result<Tensor>
//   auto v = t->view<float>();                                   // Result<TensorView<float>>
//   (*v)(1, 2) == 6;  v->numel() == 6;
//   t->view<double>()  -> error "tensor [2, 3] is f32 but was viewed as f64"
//
//   std::vector<float> pixels(784);
//   const TensorRef in[] = {TensorRef::of<float>("x", pixels, {1, 784})};   // dtype from float
//   model->forward(in);
//   auto logits = model->output<float>("logits");   // Result<TensorView<const float>>, dtype checked
module;
#include <new>  // the aligned, non-throwing operator new (global functions: not in teeny.std)
export module teeny.core:tensor;
import teeny.std;
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
    auto numel = checked_numel(shape);
    if (!numel) return std::move(numel).error();
    auto buffer = Buffer::allocate(static_cast<std::size_t>(*numel) * size_of(dtype));
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
    auto numel = checked_numel(shape);
    if (!numel) return std::move(numel).error();
    if (static_cast<std::int64_t>(values.size()) != *numel) {
      return fail(Errc::shape_mismatch, values.size(), " values do not fill shape ", shape, " (", *numel, " elements)");
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

/// A tensor with a name: what the Model concept's forward takes and returns.
struct NamedTensor {
  std::string name;
  Tensor tensor;
};

/// A named tensor borrowed from elsewhere: its dtype, shape and native, row-major bytes. What a
/// model's forward reads its inputs from, what load_weights and save_safetensors take, and what
/// a model lists its parameters as. The name and the bytes must outlive it.
struct TensorRef {
  std::string_view name;
  DType dtype = DType::f32;
  ConcreteShape shape;
  std::span<const std::byte> data;

  /// Borrows a whole Tensor under `name`.
  static TensorRef of(std::string_view name, const Tensor& tensor) {
    return {name, tensor.dtype(), tensor.shape(), {tensor.data(), tensor.bytes()}};
  }
  /// Borrows a NamedTensor under its own name.
  static TensorRef of(const NamedTensor& named) { return of(named.name, named.tensor); }
  /// Borrows typed values as a tensor of `shape`; the dtype is T's (`of<float>` is f32). Whoever
  /// reads it checks that the values fill the shape.
  ///   TensorRef::of<float>("x", pixels, {1, 784})     // pixels: a std::vector<float>
  template <Element T>
  static TensorRef of(std::string_view name, std::span<const T> values, const ConcreteShape& shape) {
    return {name, dtype_of<T>, shape, std::as_bytes(values)};
  }

  /// A typed view of the bytes (contiguous). An error names the tensor when T is not its dtype,
  /// when the bytes do not fill the shape or when they are not aligned for T.
  template <Element T>
  Result<TensorView<const T>> view() const {
    if (dtype_of<T> != dtype) {
      return fail(Errc::dtype_mismatch, "tensor '", name, "' is ", dtype, " but was viewed as ", dtype_of<T>);
    }
    auto numel = checked_numel(shape);
    if (!numel) return std::move(numel).error().context(cat("tensor '", name, "'"));
    if (data.size() != static_cast<std::size_t>(*numel) * sizeof(T)) {
      return fail(Errc::invalid_argument, "tensor '", name, "' (", dtype, " ", shape, ") has ", data.size(),
                  " bytes, not ", *numel, " x ", sizeof(T));
    }
    if (reinterpret_cast<std::uintptr_t>(data.data()) % alignof(T) != 0) {
      return fail(Errc::unsupported, "tensor '", name, "': its bytes are not aligned to ", alignof(T),
                  " bytes, so they cannot be viewed as ", dtype_of<T>, " in place");
    }
    return TensorView<const T>(reinterpret_cast<const T*>(data.data()), shape);
  }
};

/// One tensor as an execution plan binds it: untyped storage with its dtype, concrete shape and
/// the row stride (elements between rows; may exceed the last dim for padded/TMA layouts). A
/// model's output(name) returns one; output<T>(name) the typed view.
struct TensorBinding {
  void* data = nullptr;
  DType dtype = DType::f32;
  ConcreteShape shape;
  std::int64_t row_stride = 0;  // 0: the natural stride, shape.last()

  /// A typed view of the binding (strided when the rows are padded); an error names both dtypes
  /// when they differ.
  template <Element T>
  Result<TensorView<T>> as() const {
    if (dtype_of<T> != dtype) {
      return fail(Errc::dtype_mismatch, "tensor ", shape, " is bound as ", dtype, " but the kernel reads ",
                  dtype_of<T>);
    }
    ConcreteShape strides = contiguous_strides(shape);
    if (row_stride != 0 && shape.rank() >= 2 && row_stride != shape.last()) {
      strides[shape.rank() - 2] = row_stride;
      for (std::size_t i = shape.rank() - 2; i-- > 0;) strides[i] = strides[i + 1] * shape[i + 1];
    }
    return TensorView<T>(static_cast<T*>(data), shape, strides);
  }
};

}  // namespace teeny
