// teeny.io:npy — reads and writes NumPy's .npy files (numpy.save / numpy.load), the format
// teeny-run takes its inputs and expected outputs in and writes its outputs as.
//
// A .npy file is the magic "\x93NUMPY", a format version (1.0: a 2-byte header length; 2.0 and
// 3.0: 4 bytes), a Python dict literal such as {'descr': '<f4', 'fortran_order': False,
// 'shape': (2, 3), } padded with spaces to a multiple of 64 bytes, then the elements.
//
//   auto x = read_npy("input.npy");                            // Result<Tensor>, C order, native
//   auto saved = save_npy("y.npy", TensorRef::of("y", *x));    // format 1.0, little-endian
//
// Reading takes bool, int8 to int64, uint8 to uint64, float16, float32 and float64, either byte
// order, in C or Fortran order (returned in C order); anything else (complex, strings, objects,
// structured dtypes) is refused by name. Every error names the file.
module;
#include <cerrno>
export module teeny.io:npy;
import teeny.std;
import teeny.core;
import :mapped_file;

export namespace teeny {

/// Reads the .npy file at `path` into a tensor in C order and native byte order.
Result<Tensor> read_npy(const std::string& path);
/// Parses a .npy image held in memory; `name` stands for the path in errors.
Result<Tensor> parse_npy(std::span<const std::byte> bytes, std::string_view name = "<memory>");
/// Writes `tensor` (native, row-major bytes) as a .npy file, format 1.0, little-endian. NumPy
/// has no bfloat16: a bf16 tensor is refused (convert it to f32 first). Written to
/// "<path>.partial" and renamed, so a failed write leaves no half file.
Result<void> save_npy(const std::string& path, const TensorRef& tensor);

}  // namespace teeny

namespace teeny::io_detail {

inline constexpr std::string_view npy_magic = "\x93NUMPY";

/// NumPy's type string for a dtype, without the byte-order character.
std::optional<std::string_view> npy_type(DType d) {
  switch (d) {
    case DType::boolean: return "b1";
    case DType::i8: return "i1";
    case DType::i16: return "i2";
    case DType::i32: return "i4";
    case DType::i64: return "i8";
    case DType::u8: return "u1";
    case DType::u16: return "u2";
    case DType::u32: return "u4";
    case DType::u64: return "u8";
    case DType::f16: return "f2";
    case DType::f32: return "f4";
    case DType::f64: return "f8";
    case DType::bf16:
    case DType::count: break;
  }
  return std::nullopt;
}

/// The header dict's three entries.
struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  ConcreteShape shape;
};

/// A reader of the header's Python literal: strings, True/False and tuples of integers.
class NpyHeaderParser {
 public:
  explicit NpyHeaderParser(std::string_view text) : text_(text) {}

  Result<NpyHeader> parse() {
    NpyHeader header;
    bool seen[3] = {false, false, false};
    if (!take('{')) return error("the header is not a dict (it does not start with '{')");
    while (true) {
      skip_space();
      if (take('}')) break;
      auto key = string();
      if (!key) return std::move(key).error();
      if (!take(':')) return error(cat("no ':' after the key '", *key, "'"));
      int index = -1;
      if (*key == "descr") {
        index = 0;
        skip_space();
        if (pos_ < text_.size() && text_[pos_] == '[') {
          return error("'descr' is a list: a structured dtype, which teeny does not read");
        }
        auto descr = string();
        if (!descr) return std::move(descr).error();
        header.descr = std::move(*descr);
      } else if (*key == "fortran_order") {
        index = 1;
        auto flag = boolean();
        if (!flag) return std::move(flag).error();
        header.fortran_order = *flag;
      } else if (*key == "shape") {
        index = 2;
        auto shape = tuple();
        if (!shape) return std::move(shape).error();
        header.shape = *shape;
      } else {
        return error(cat("unknown key '", *key, "' (a .npy header has descr, fortran_order and shape)"));
      }
      if (seen[index]) return error(cat("the key '", *key, "' is given twice"));
      seen[index] = true;
      skip_space();
      if (take('}')) break;
      if (!take(',')) return error(cat("expected ',' or '}' after the value of '", *key, "'"));
    }
    for (std::size_t i = 0; i < 3; ++i) {
      if (!seen[i]) {
        return error(cat("the key '", std::array{"descr", "fortran_order", "shape"}[i], "' is missing"));
      }
    }
    return header;
  }

 private:
  Error error(std::string_view what) const {
    return Error(Errc::parse, cat(what, " (at byte ", pos_, " of the header)"));
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n')) ++pos_;
  }
  bool take(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  Result<std::string> string() {
    skip_space();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) return error("expected a quoted string");
    const char quote = text_[pos_++];
    const std::size_t end = text_.find(quote, pos_);
    if (end == std::string_view::npos) return error("a string is not closed");
    std::string s(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return s;
  }
  Result<bool> boolean() {
    skip_space();
    for (const auto& [word, value] : {std::pair{std::string_view("True"), true}, {"False", false}}) {
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return value;
      }
    }
    return error("'fortran_order' is neither True nor False");
  }
  Result<ConcreteShape> tuple() {
    if (!take('(')) return error("'shape' is not a tuple");
    ConcreteShape shape;
    while (true) {
      if (take(')')) return shape;
      skip_space();
      std::int64_t value = 0;
      std::size_t digits = 0;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
        if (value > (std::int64_t{1} << 56)) return error("a dim of 'shape' is too large");
        value = value * 10 + (text_[pos_++] - '0');
        ++digits;
      }
      if (pos_ < text_.size() && text_[pos_] == 'L') ++pos_;  // Python 2's long
      if (digits == 0) return error("'shape' holds something other than non-negative integers");
      if (shape.rank() == max_rank) return error(cat("'shape' has more than ", max_rank, " dims"));
      shape.push_back(value);
      if (take(')')) return shape;
      if (!take(',')) return error("expected ',' or ')' in 'shape'");
    }
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

Result<Tensor> parse_npy_bytes(std::span<const std::byte> bytes) {
  const auto byte = [&](std::size_t i) { return static_cast<std::uint8_t>(bytes[i]); };
  if (bytes.size() < 10 ||
      std::string_view(reinterpret_cast<const char*>(bytes.data()), npy_magic.size()) != npy_magic) {
    return fail(Errc::parse, "not a .npy file (it does not start with \\x93NUMPY)");
  }
  const unsigned major = byte(6);
  if (major < 1 || major > 3)
    return fail(Errc::unsupported, "format version ", major, ".", byte(7), " (teeny reads 1 to 3)");
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  const std::size_t start = 8 + length_bytes;
  if (bytes.size() < start) return fail(Errc::parse, "truncated in the header length");
  std::size_t header_length = 0;
  for (std::size_t i = 0; i < length_bytes; ++i) header_length |= std::size_t{byte(8 + i)} << (8 * i);
  if (header_length > bytes.size() - start) {
    return fail(Errc::parse, "the header is ", header_length, " bytes but only ", bytes.size() - start, " follow");
  }
  auto header = NpyHeaderParser({reinterpret_cast<const char*>(bytes.data()) + start, header_length}).parse();
  if (!header) return std::move(header).error();

  std::string_view descr = header->descr;
  char order = '=';
  if (!descr.empty() && (descr[0] == '<' || descr[0] == '>' || descr[0] == '|' || descr[0] == '=')) {
    order = descr[0];
    descr.remove_prefix(1);
  }
  std::optional<DType> dtype;
  for (DType d : all_dtypes) {
    if (npy_type(d) == descr) dtype = d;
  }
  if (!dtype) {
    return fail(Errc::unsupported, "dtype '", header->descr,
                "' (teeny reads bool, int8 to int64, uint8 to uint64, float16, float32 and float64)");
  }
  const std::size_t element = size_of(*dtype);
  const ConcreteShape& shape = header->shape;
  auto numel = checked_numel(shape);
  if (!numel) return std::move(numel).error();
  const auto needed = static_cast<std::uint64_t>(*numel) * element;
  const std::span<const std::byte> data = bytes.subspan(start + header_length);
  if (needed != data.size()) {
    return fail(Errc::parse, "shape ", shape, " of ", *dtype, " needs ", needed, " bytes of data, the file has ",
                data.size(), needed > data.size() ? " (truncated)" : " (trailing bytes)");
  }
  auto tensor = Tensor::zeros(*dtype, shape);
  if (!tensor) return std::move(tensor).error();
  std::byte* out = tensor->data();
  const std::size_t rank = shape.rank();
  if (!header->fortran_order || rank < 2) {
    if (!data.empty()) std::memcpy(out, data.data(), data.size());
  } else {
    // Fortran order: the first index varies fastest. Walk the C-order output, tracking the input offset.
    std::array<std::int64_t, max_rank> index{};
    std::array<std::int64_t, max_rank> stride{};
    for (std::size_t k = 0, s = 1; k < rank; s *= static_cast<std::size_t>(shape[k]), ++k) {
      stride[k] = static_cast<std::int64_t>(s);
    }
    std::int64_t from = 0;
    for (std::int64_t i = 0; i < *numel; ++i) {
      std::memcpy(out + i * element, data.data() + from * element, element);
      for (std::size_t k = rank; k-- > 0;) {
        from += stride[k];
        if (++index[k] < shape[k]) break;
        from -= stride[k] * shape[k];
        index[k] = 0;
      }
    }
  }
  if (order == '>' && element > 1) {
    for (std::int64_t i = 0; i < *numel; ++i) std::reverse(out + i * element, out + (i + 1) * element);
  }
  if (*dtype == DType::boolean) {  // NumPy reads any nonzero byte as True; a C++ bool must be 0 or 1
    for (std::int64_t i = 0; i < *numel; ++i) out[i] = out[i] == std::byte{0} ? std::byte{0} : std::byte{1};
  }
  return tensor;
}

}  // namespace teeny::io_detail

namespace teeny {

Result<Tensor> read_npy(const std::string& path) {
  auto file = io_detail::MappedFile::open(path);
  if (!file) return std::move(file).error();
  auto tensor = io_detail::parse_npy_bytes(file->bytes());
  if (!tensor) return std::move(tensor).error().context(cat(".npy file '", path, "'"));
  return tensor;
}

Result<Tensor> parse_npy(std::span<const std::byte> bytes, std::string_view name) {
  auto tensor = io_detail::parse_npy_bytes(bytes);
  if (!tensor) return std::move(tensor).error().context(cat(".npy file '", name, "'"));
  return tensor;
}

Result<void> save_npy(const std::string& path, const TensorRef& tensor) {
  const std::string where = cat("saving .npy file '", path, "'");
  const auto type = io_detail::npy_type(tensor.dtype);
  if (!type) {
    return fail(Errc::unsupported, "tensor '", tensor.name, "' is ", tensor.dtype,
                ", which NumPy has no dtype for (convert it to f32)")
        .context(where);
  }
  auto numel = checked_numel(tensor.shape);
  if (!numel) return std::move(numel).error().context(where);
  if (tensor.data.size() != static_cast<std::uint64_t>(*numel) * size_of(tensor.dtype)) {
    return fail(Errc::invalid_argument, "tensor '", tensor.name, "' (", tensor.dtype, " ", tensor.shape, ") needs ",
                *numel * static_cast<std::int64_t>(size_of(tensor.dtype)), " bytes of data, got ", tensor.data.size())
        .context(where);
  }
  std::string dims;
  for (std::size_t i = 0; i < tensor.shape.rank(); ++i) dims += cat(tensor.shape[i], ", ");
  if (tensor.shape.rank() > 1) dims.resize(dims.size() - 2);  // (2, 3) but (3,) and ()
  if (tensor.shape.rank() == 1) dims.resize(dims.size() - 1);
  std::string header = cat("{'descr': '", size_of(tensor.dtype) == 1 ? "|" : "<", *type,
                           "', 'fortran_order': False, 'shape': (", dims, "), }");
  // Padded with spaces and a closing newline so that the data starts at a multiple of 64 bytes.
  const std::size_t prefix = io_detail::npy_magic.size() + 4;
  header.append(63 - (prefix + header.size()) % 64, ' ');
  header += '\n';
  std::string head(io_detail::npy_magic);
  head += '\x01';
  head += '\x00';
  head += static_cast<char>(header.size() & 0xff);
  head += static_cast<char>(header.size() >> 8);
  head += header;

  const std::string partial = path + ".partial";
  std::FILE* f = std::fopen(partial.c_str(), "wb");
  if (f == nullptr) return fail(Errc::io, "cannot create '", partial, "': ", std::strerror(errno)).context(where);
  static_assert(std::endian::native == std::endian::little, "the tensor's native bytes are written as '<'");
  bool written =
      std::fwrite(head.data(), 1, head.size(), f) == head.size() &&
      (tensor.data.empty() || std::fwrite(tensor.data.data(), 1, tensor.data.size(), f) == tensor.data.size());
  const int write_errno = errno;
  if (std::fclose(f) != 0) written = false;
  if (written && std::rename(partial.c_str(), path.c_str()) == 0) return ok();
  const int err = written ? errno : write_errno;
  std::remove(partial.c_str());
  return fail(Errc::io, "cannot write '", path, "': ", std::strerror(err)).context(where);
}

}  // namespace teeny
