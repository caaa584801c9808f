// teeny.onnx:tensors — ONNX tensors (initializers, Constant values, test data) as teeny Tensors:
// their dtype, their elements from the file or from an external data file beside it, checked
// against their dims before anything is allocated.
module;
#include <cstdio>

#include "onnx/proto.hpp"
export module teeny.onnx:tensors;
import teeny.std;
import teeny.core;

export namespace teeny::onnx {

/// ONNX's name of a TensorProto.DataType ("FLOAT", "INT64"), or its number when unknown.
std::string onnx_type_name(std::int32_t type);

/// teeny's dtype for an ONNX element type: an error naming the type for those teeny does not
/// store (strings, complex numbers, the 8-bit floats).
Result<DType> dtype_from_onnx(std::int32_t type);

/// Limits checked before allocating (a file is input: a wrong size must not become an allocation).
struct TensorLimits {
  std::int64_t max_elements = std::int64_t{1} << 31;  // per tensor
};

/// The bytes of the file at `path` from `offset` on, `length` of them (-1: to its end), checked
/// against the file's size before anything is allocated.
Result<std::vector<std::byte>> read_file(const std::filesystem::path& path, std::int64_t offset = 0,
                                         std::int64_t length = -1);

/// Where an ONNX file's external data files are: its folder. A location that leaves the folder
/// (an absolute path, "..", a symlink out of it) is refused.
class ExternalData {
 public:
  ExternalData() = default;  // the model came as bytes: no external data can be read
  explicit ExternalData(std::filesystem::path folder) : folder_(std::move(folder)), has_folder_(true) {}

  /// The `length` bytes at `offset` of `location` (length -1: to the end of the file).
  Result<std::vector<std::byte>> bytes(const std::string& location, std::int64_t offset, std::int64_t length) const;

 private:
  std::filesystem::path folder_;
  bool has_folder_ = false;
};

/// The tensor's elements as a teeny Tensor of its own dtype and dims.
Result<Tensor> to_tensor(const proto::Tensor& t, const ExternalData& external, const TensorLimits& limits = {});

}  // namespace teeny::onnx

namespace teeny::onnx {

std::string onnx_type_name(std::int32_t type) {
  static constexpr const char* names[] = {"UNDEFINED", "FLOAT",  "UINT8",     "INT8",       "UINT16",  "INT16",
                                          "INT32",     "INT64",  "STRING",    "BOOL",       "FLOAT16", "DOUBLE",
                                          "UINT32",    "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16"};
  if (type >= 0 && type < static_cast<std::int32_t>(std::size(names))) return names[type];
  return cat("type ", type);
}

Result<DType> dtype_from_onnx(std::int32_t type) {
  switch (type) {
    case proto::float32: return DType::f32;
    case proto::uint8: return DType::u8;
    case proto::int8: return DType::i8;
    case proto::uint16: return DType::u16;
    case proto::int16: return DType::i16;
    case proto::int32: return DType::i32;
    case proto::int64: return DType::i64;
    case proto::boolean: return DType::boolean;
    case proto::float16: return DType::f16;
    case proto::float64: return DType::f64;
    case proto::uint32: return DType::u32;
    case proto::uint64: return DType::u64;
    case proto::bfloat16: return DType::bf16;
    default: return fail(Errc::unsupported, "element type ", onnx_type_name(type), " is not one teeny stores");
  }
}

Result<std::vector<std::byte>> read_file(const std::filesystem::path& path, std::int64_t offset, std::int64_t length) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return fail(std::filesystem::exists(path, ec) ? Errc::io : Errc::not_found, "'", path.string(),
                "' is not a file that exists");
  }
  const auto size = static_cast<std::int64_t>(std::filesystem::file_size(path, ec));
  if (ec) return fail(Errc::io, "cannot read the size of '", path.string(), "': ", ec.message());
  if (offset < 0 || offset > size) {
    return fail(Errc::out_of_range, "'", path.string(), "': offset ", offset, " is outside its ", size, " bytes");
  }
  if (length == -1) length = size - offset;
  if (length < 0 || length > size - offset) {
    return fail(Errc::out_of_range, "'", path.string(), "': ", length, " bytes at offset ", offset,
                " run past its end (", size, " bytes)");
  }
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) return fail(Errc::io, "cannot open '", path.string(), "'");
  std::vector<std::byte> bytes(static_cast<std::size_t>(length));
  if (std::fseek(file.get(), static_cast<long>(offset), SEEK_SET) != 0 ||
      std::fread(bytes.data(), 1, bytes.size(), file.get()) != bytes.size()) {
    return fail(Errc::io, "cannot read ", length, " bytes at offset ", offset, " of '", path.string(), "'");
  }
  return bytes;
}

Result<std::vector<std::byte>> ExternalData::bytes(const std::string& location, std::int64_t offset,
                                                   std::int64_t length) const {
  if (!has_folder_) {
    return fail(Errc::unsupported, "external data '", location,
                "' cannot be read from a model given as bytes (import it from its file)");
  }
  const std::filesystem::path relative(location);
  if (location.empty() || relative.is_absolute() || relative.has_root_name()) {
    return fail(Errc::invalid_argument, "external data location '", location,
                "' must be a path relative to the model's folder");
  }
  std::error_code ec;
  const auto folder = std::filesystem::weakly_canonical(folder_.empty() ? "." : folder_, ec);
  const auto file = std::filesystem::weakly_canonical((folder_.empty() ? "." : folder_) / relative, ec);
  if (ec) return fail(Errc::io, "external data '", location, "': ", ec.message());
  // The resolved path (symlinks followed) must stay inside the model's folder.
  const auto inside = file.lexically_relative(folder);
  if (inside.empty() || *inside.begin() == "..") {
    return fail(Errc::invalid_argument, "external data location '", location, "' leaves the model's folder");
  }
  auto read = read_file(file, offset, length);
  if (!read) return std::move(read).error().context(cat("external data '", location, "'"));
  return read;
}

Result<Tensor> to_tensor(const proto::Tensor& t, const ExternalData& external, const TensorLimits& limits) {
  auto dtype = dtype_from_onnx(t.data_type);
  if (!dtype) return std::move(dtype).error();
  if (t.dims.size() > max_rank) return fail(Errc::unsupported, "rank ", t.dims.size(), " is over ", max_rank);
  std::int64_t numel = 1;
  for (const std::int64_t d : t.dims) {
    if (d < 0) return fail(Errc::invalid_argument, "dim ", d, " is negative");
    if (d != 0 && numel > limits.max_elements / d) {
      return fail(Errc::out_of_range, "dims of over ", limits.max_elements, " elements");
    }
    numel *= d;
  }
  auto shape = ConcreteShape::from(t.dims);
  if (!shape) return std::move(shape).error();
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(t.bytes.data()), t.bytes.size());
  std::vector<std::byte> stored;
  if (t.external) {
    auto read = external.bytes(t.location, t.offset, t.length);
    if (!read) return std::move(read).error();
    stored = std::move(*read);
    bytes = stored;
  }
  const std::size_t want = static_cast<std::size_t>(numel) * size_of(*dtype);
  if (bytes.size() != want) {
    return fail(Errc::shape_mismatch, "holds ", bytes.size(), " bytes, but ", *dtype, " ", *shape, " needs ", want);
  }
  auto tensor = Tensor::zeros(*dtype, *shape);
  if (!tensor) return std::move(tensor).error();
  if (want != 0) std::memcpy(tensor->data(), bytes.data(), want);
  if (*dtype == DType::boolean) {  // a file's bool byte may be any value: nonzero is true, stored as 1
    std::byte* p = tensor->data();
    for (std::size_t i = 0; i < want; ++i) p[i] = p[i] == std::byte{0} ? std::byte{0} : std::byte{1};
  }
  return tensor;
}

}  // namespace teeny::onnx
