// teeny.io:safetensors — reads and writes safetensors, the weight format of PyTorch and Hugging
// Face: an 8-byte little-endian header length N, N bytes of JSON naming each tensor's dtype, shape
// and byte range, then the little-endian, row-major data.
//
//   auto file = SafetensorsFile::open("model.safetensors");    // maps the file; validates it all
//   if (!file) return std::move(file).error();
//   for (const auto& e : file->entries()) std::printf("%s %s\n", e.name.c_str(), to_string(e.shape).c_str());
//   auto w = file->read("fc1.weight", DType::f32);              // Result<Tensor>, converted from f16/bf16/f64
//   auto v = file->view<float>(*file->find("fc1.bias"));        // zero-copy when the dtype matches and is aligned
//
//   TensorRef refs[] = {TensorRef::of("fc1.weight", weight), TensorRef::of("fc1.bias", bias)};
//   auto saved = save_safetensors("out.safetensors", refs, {{"format", "pt"}});
//
// Opening checks everything up front (header length, JSON, dtypes, shapes, byte ranges, overlaps),
// so that any file that opens can be read without further checks; no input makes it crash.
// Every error names the file and, where there is one, the tensor.
module;
#include <cerrno>
export module teeny.io:safetensors;
import teeny.std;
import teeny.core;
import :json;
import :mapped_file;
import :convert;

export namespace teeny {

/// One tensor of a safetensors file. `data` points into the file's mapping (zero-copy): it is
/// little-endian, row-major, and may be unaligned (offsets in the file are arbitrary).
struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::f32;
  ConcreteShape shape;
  std::span<const std::byte> data;
  std::size_t offset = 0;  // where `data` starts, counted from the start of the data buffer
};

/// An open, validated safetensors file. Move-only; entries and views stay valid while it lives.
class SafetensorsFile {
 public:
  using Entry = SafetensorsEntry;

  /// Maps and validates `path`. Errors (Errc::not_found, io or parse) name the file and the key.
  static Result<SafetensorsFile> open(const std::string& path);
  /// Validates a safetensors image held in memory (copied); `name` stands for the path in errors.
  static Result<SafetensorsFile> parse(std::span<const std::byte> bytes, std::string name = "<memory>");

  /// The path given to open (or the name given to parse).
  const std::string& path() const { return path_; }
  /// Every tensor, in the order of its bytes in the file.
  std::span<const Entry> entries() const { return entries_; }
  /// The tensor named `name`, or nullptr.
  const Entry* find(std::string_view name) const;
  /// The header's "__metadata__" (string to string; empty when the file has none).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  /// N, the length of the JSON header (the data buffer starts at byte 8 + N).
  std::size_t header_size() const { return header_size_; }

  /// Copies the tensor into a new Tensor of dtype `target`: any dtype converts to a floating one
  /// (rounding to nearest even), integers convert to integers when every value fits; floating to
  /// integer is refused (it would truncate).
  Result<Tensor> read(const Entry& entry, DType target) const;
  /// The tensor named `name`, copied, in its own dtype or converted to `target`.
  Result<Tensor> read(std::string_view name) const;
  Result<Tensor> read(std::string_view name, DType target) const;

  /// A zero-copy view of the tensor's elements. An error when T is not its dtype, when its bytes
  /// are not aligned for T (then use read, which copies), or on a big-endian host.
  template <Element T>
  Result<TensorView<const T>> view(const Entry& entry) const {
    if (auto bad = check_viewable(entry, dtype_of<T>, alignof(T)); !bad) return std::move(bad).error();
    return TensorView<const T>(reinterpret_cast<const T*>(entry.data.data()), entry.shape);
  }
  template <Element T>
  Result<TensorView<const T>> view(std::string_view name) const {
    auto entry = lookup(name);
    if (!entry) return std::move(entry).error();
    return view<T>(**entry);
  }

 private:
  Result<const Entry*> lookup(std::string_view name) const;
  Result<void> check_viewable(const Entry& entry, DType dtype, std::size_t alignment) const;
  Result<void> validate();

  std::string path_;
  io_detail::MappedFile file_;
  std::size_t header_size_ = 0;
  std::vector<Entry> entries_;
  std::map<std::string, std::size_t, std::less<>> index_;  // name -> position in entries_
  std::map<std::string, std::string> metadata_;
};

/// Writes `tensors` and `metadata` to `path` as safetensors. The layout is the one the
/// safetensors library writes, so the file reads back in Python byte for byte: header keys
/// "__metadata__" first, tensors ordered by dtype (widest first, which keeps every tensor aligned
/// without gaps) then by name, compact JSON padded with spaces to a multiple of 8 bytes.
/// Names must be unique and not "__metadata__"; each data size must be numel x dtype size.
/// The file appears complete or not at all (written to "<path>.partial", then renamed).
Result<void> save_safetensors(const std::string& path, std::span<const TensorRef> tensors,
                              const std::map<std::string, std::string>& metadata = {});

}  // namespace teeny

namespace teeny::io_detail {

inline constexpr std::string_view metadata_key = "__metadata__";

/// The dtypes safetensors spells, for "unknown dtype" messages.
std::string supported_dtype_names() {
  std::string names;
  for (DType d : all_dtypes) names += cat(names.empty() ? "" : ", ", safetensors_name(d));
  return names;
}

std::optional<DType> parse_safetensors_dtype(std::string_view text) {
  for (DType d : all_dtypes) {
    if (safetensors_name(d) == text) return d;
  }
  return std::nullopt;
}

/// The safetensors library's order of dtypes (its Rust enum), which its writer sorts by, widest first.
int writer_rank(DType d) {
  switch (d) {
    case DType::boolean: return 0;
    case DType::u8: return 1;
    case DType::i8: return 2;
    case DType::i16: return 3;
    case DType::u16: return 4;
    case DType::f16: return 5;
    case DType::bf16: return 6;
    case DType::i32: return 7;
    case DType::u32: return 8;
    case DType::f32: return 9;
    case DType::f64: return 10;
    case DType::i64: return 11;
    case DType::u64: return 12;
    case DType::count: break;  // not a dtype
  }
  return 0;
}

/// A non-negative JSON integer, or nothing.
std::optional<std::uint64_t> non_negative_integer(const json::Value& v) {
  if (v.kind != json::Value::Kind::number || !v.integer || *v.integer < 0) return std::nullopt;
  return static_cast<std::uint64_t>(*v.integer);
}

/// A tensor's header entry, parsed and checked on its own (the byte range is checked later).
struct Parsed {
  DType dtype = DType::f32;
  ConcreteShape shape;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

Result<Parsed> parse_tensor_info(const json::Value& info) {
  if (!info.is_object()) {
    return fail(Errc::parse, "expected an object with dtype, shape and data_offsets, got ", json::describe(info.kind));
  }
  for (const std::string& key : info.keys) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      return fail(Errc::parse, "unknown field '", key, "' (expected dtype, shape and data_offsets)");
    }
  }
  Parsed out;
  const json::Value* dtype = info.find("dtype");
  if (dtype == nullptr) return fail(Errc::parse, "has no 'dtype'");
  if (!dtype->is_string()) return fail(Errc::parse, "'dtype' must be a string, got ", json::describe(dtype->kind));
  auto d = parse_safetensors_dtype(dtype->string);
  if (!d) return fail(Errc::parse, "unknown dtype '", dtype->string, "' (supported: ", supported_dtype_names(), ")");
  out.dtype = *d;

  const json::Value* shape = info.find("shape");
  if (shape == nullptr) return fail(Errc::parse, "has no 'shape'");
  if (!shape->is_array()) return fail(Errc::parse, "'shape' must be an array, got ", json::describe(shape->kind));
  if (shape->items.size() > max_rank) {
    return fail(Errc::parse, "shape has ", shape->items.size(), " dims; at most ", max_rank, " are supported");
  }
  for (std::size_t i = 0; i < shape->items.size(); ++i) {
    auto dim = non_negative_integer(shape->items[i]);
    if (!dim) return fail(Errc::parse, "shape dim ", i, " is not a non-negative integer");
    out.shape.push_back(static_cast<std::int64_t>(*dim));
  }
  // At most 2^56 elements, so the byte count below cannot wrap.
  auto numel = checked_numel(out.shape);
  if (!numel) return fail(Errc::parse, numel.error().message());
  const std::uint64_t bytes = static_cast<std::uint64_t>(*numel) * size_of(out.dtype);

  const json::Value* offsets = info.find("data_offsets");
  if (offsets == nullptr) return fail(Errc::parse, "has no 'data_offsets'");
  std::optional<std::uint64_t> begin;
  std::optional<std::uint64_t> end;
  if (offsets->is_array() && offsets->items.size() == 2) {
    begin = non_negative_integer(offsets->items[0]);
    end = non_negative_integer(offsets->items[1]);
  }
  if (!begin || !end || *begin > *end) {
    return fail(Errc::parse, "'data_offsets' must be two ordered non-negative integers [begin, end]");
  }
  out.begin = *begin;
  out.end = *end;
  if (*end - *begin != bytes) {
    return fail(Errc::parse, "data_offsets [", *begin, ", ", *end, "] hold ", *end - *begin, " bytes, but ", out.dtype,
                " ", out.shape, " needs ", *numel, " x ", size_of(out.dtype), " = ", bytes);
  }
  return out;
}

Result<void> write_all(std::FILE* f, const void* data, std::size_t size) {
  if (size != 0 && std::fwrite(data, 1, size, f) != size) return fail(Errc::io, std::strerror(errno));
  return ok();
}

/// Writes native elements as little-endian.
Result<void> write_le(std::FILE* f, std::span<const std::byte> data, std::size_t element_size) {
  if constexpr (std::endian::native == std::endian::little) {
    return write_all(f, data.data(), data.size());
  } else {
    std::array<std::byte, 4096> chunk;  // a multiple of every element size
    for (std::size_t at = 0; at < data.size(); at += chunk.size()) {
      const std::size_t n = std::min(chunk.size(), data.size() - at);
      std::memcpy(chunk.data(), data.data() + at, n);
      for (std::size_t i = 0; i < n; i += element_size) std::reverse(chunk.data() + i, chunk.data() + i + element_size);
      if (auto w = write_all(f, chunk.data(), n); !w) return w;
    }
    return ok();
  }
}

}  // namespace teeny::io_detail

namespace teeny {

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  auto mapped = io_detail::MappedFile::open(path);
  if (!mapped) return std::move(mapped).error().context("safetensors file");
  SafetensorsFile file;
  file.path_ = path;
  file.file_ = std::move(*mapped);
  if (auto valid = file.validate(); !valid) return std::move(valid).error();
  return file;
}

Result<SafetensorsFile> SafetensorsFile::parse(std::span<const std::byte> bytes, std::string name) {
  auto copy = io_detail::MappedFile::copy_of(bytes);
  if (!copy) return std::move(copy).error().context(cat("safetensors file '", name, "'"));
  SafetensorsFile file;
  file.path_ = std::move(name);
  file.file_ = std::move(*copy);
  if (auto valid = file.validate(); !valid) return std::move(valid).error();
  return file;
}

Result<void> SafetensorsFile::validate() {
  const std::string where = cat("safetensors file '", path_, "'");
  const std::span<const std::byte> bytes = file_.bytes();
  if (bytes.empty())
    return fail(Errc::parse, "the file is empty (it should start with an 8-byte header length)").context(where);
  if (bytes.size() < 8) {
    return fail(Errc::parse, "truncated: the file has ", bytes.size(),
                " bytes, fewer than the 8-byte header length that starts it")
        .context(where);
  }
  std::uint64_t n = 0;
  for (std::size_t i = 8; i-- > 0;) n = (n << 8) | std::to_integer<std::uint64_t>(bytes[i]);
  const std::uint64_t after_length = bytes.size() - 8;
  if (n > bytes.size()) {
    return fail(Errc::parse, "the header length is ", n, " bytes but the whole file has ", bytes.size(),
                " (not a safetensors file?)")
        .context(where);
  }
  if (n > after_length) {
    return fail(Errc::parse, "truncated: the header length is ", n, " bytes but only ", after_length,
                " follow the length field")
        .context(where);
  }
  header_size_ = static_cast<std::size_t>(n);
  const std::string_view header(reinterpret_cast<const char*>(bytes.data() + 8), header_size_);
  const std::span<const std::byte> data = bytes.subspan(8 + header_size_);

  auto root = json::parse(header, "header JSON");
  if (!root) return std::move(root).error().context(where);
  if (!root->is_object()) {
    return fail(Errc::parse, "the header must be a JSON object, got ", json::describe(root->kind)).context(where);
  }

  std::vector<io_detail::Parsed> parsed;
  for (std::size_t i = 0; i < root->keys.size(); ++i) {
    const std::string& key = root->keys[i];
    const json::Value& value = root->items[i];
    if (key == io_detail::metadata_key) {
      if (!value.is_object()) {
        return fail(Errc::parse, "'__metadata__' must be an object of strings, got ", json::describe(value.kind))
            .context(where);
      }
      for (std::size_t m = 0; m < value.keys.size(); ++m) {
        if (!value.items[m].is_string()) {
          return fail(Errc::parse, "'__metadata__' value '", value.keys[m], "' must be a string, got ",
                      json::describe(value.items[m].kind))
              .context(where);
        }
        metadata_.emplace(value.keys[m], value.items[m].string);
      }
      continue;
    }
    auto info = io_detail::parse_tensor_info(value);
    if (!info) return std::move(info).error().context(cat("tensor '", key, "'")).context(where);
    if (info->end > data.size()) {
      return fail(Errc::parse, "data_offsets [", info->begin, ", ", info->end, "] end past the data buffer (",
                  data.size(), " bytes after the header): truncated file?")
          .context(cat("tensor '", key, "'"))
          .context(where);
    }
    Entry entry;
    entry.name = key;
    entry.dtype = info->dtype;
    entry.shape = info->shape;
    entry.offset = static_cast<std::size_t>(info->begin);
    entry.data = data.subspan(entry.offset, static_cast<std::size_t>(info->end - info->begin));
    entries_.push_back(std::move(entry));
  }

  // File order; tensors may leave gaps between them but must not share bytes.
  std::ranges::sort(entries_, [](const Entry& a, const Entry& b) {
    return a.offset != b.offset ? a.offset < b.offset : a.data.size() < b.data.size();
  });
  const Entry* previous = nullptr;
  for (const Entry& e : entries_) {
    if (e.data.empty()) continue;
    if (previous != nullptr && e.offset < previous->offset + previous->data.size()) {
      return fail(Errc::parse, "tensors '", previous->name, "' [", previous->offset, ", ",
                  previous->offset + previous->data.size(), ") and '", e.name, "' [", e.offset, ", ",
                  e.offset + e.data.size(), ") overlap")
          .context(where);
    }
    previous = &e;
  }
  for (std::size_t i = 0; i < entries_.size(); ++i) index_.emplace(entries_[i].name, i);
  return ok();
}

const SafetensorsFile::Entry* SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

Result<const SafetensorsFile::Entry*> SafetensorsFile::lookup(std::string_view name) const {
  if (const Entry* e = find(name)) return e;
  return fail(Errc::not_found, "safetensors file '", path_, "' has no tensor '", name, "' (it has ", entries_.size(),
              " tensors)");
}

Result<Tensor> SafetensorsFile::read(const Entry& entry, DType target) const {
  auto where = [&] {
    return cat("safetensors file '", path_, "': tensor '", entry.name, "' (", entry.dtype, " ", entry.shape, ")");
  };
  if (auto why = io_detail::refuse_conversion(entry.dtype, target, io_detail::Policy::value_preserving)) {
    return fail(Errc::dtype_mismatch, "cannot be read as ", target, ": ", *why).context(where());
  }
  if (auto fits = io_detail::check_values(entry.data, entry.dtype, target); !fits) {
    return std::move(fits).error().context(cat("cannot be read as ", target)).context(where());
  }
  auto tensor = Tensor::zeros(target, entry.shape);
  if (!tensor) return std::move(tensor).error().context(where());
  io_detail::convert_into(entry.data, entry.dtype, {tensor->data(), tensor->bytes()}, target);
  return tensor;
}

Result<Tensor> SafetensorsFile::read(std::string_view name) const {
  auto entry = lookup(name);
  if (!entry) return std::move(entry).error();
  return read(**entry, (*entry)->dtype);
}

Result<Tensor> SafetensorsFile::read(std::string_view name, DType target) const {
  auto entry = lookup(name);
  if (!entry) return std::move(entry).error();
  return read(**entry, target);
}

Result<void> SafetensorsFile::check_viewable(const Entry& entry, DType dtype, std::size_t alignment) const {
  auto where = [&] { return cat("safetensors file '", path_, "': tensor '", entry.name, "'"); };
  if (entry.dtype != dtype) {
    return fail(Errc::dtype_mismatch, "is ", entry.dtype, " but was viewed as ", dtype, " (read converts)")
        .context(where());
  }
  if (reinterpret_cast<std::uintptr_t>(entry.data.data()) % alignment != 0) {
    return fail(Errc::unsupported, "its data (offset ", entry.offset, ") is not aligned to ", alignment,
                " bytes, so it cannot be viewed in place (read copies it)")
        .context(where());
  }
  if constexpr (std::endian::native != std::endian::little) {
    if (size_of(dtype) > 1) {
      return fail(Errc::unsupported, "little-endian data cannot be viewed in place on this big-endian host")
          .context(where());
    }
  }
  if (dtype == DType::boolean) {  // a bool object must hold 0 or 1
    for (std::size_t i = 0; i < entry.data.size(); ++i) {
      if (std::to_integer<unsigned>(entry.data[i]) > 1) {
        return fail(Errc::parse, "element ", i, " is ", std::to_integer<unsigned>(entry.data[i]),
                    ", not a bool (0 or 1)")
            .context(where());
      }
    }
  }
  return ok();
}

Result<void> save_safetensors(const std::string& path, std::span<const TensorRef> tensors,
                              const std::map<std::string, std::string>& metadata) {
  const std::string where = cat("saving safetensors file '", path, "'");
  std::vector<const TensorRef*> order;
  for (const TensorRef& t : tensors) {
    if (t.name == io_detail::metadata_key) {
      return fail(Errc::invalid_argument, "a tensor may not be named '__metadata__'").context(where);
    }
    const auto expected = static_cast<std::uint64_t>(t.shape.numel()) * size_of(t.dtype);
    if (t.shape.numel() < 0 || t.data.size() != expected) {
      return fail(Errc::invalid_argument, "tensor '", t.name, "' (", t.dtype, " ", t.shape, ") needs ", expected,
                  " bytes of data, got ", t.data.size())
          .context(where);
    }
    order.push_back(&t);
  }
  std::ranges::sort(order, [](const TensorRef* a, const TensorRef* b) {
    const int ra = io_detail::writer_rank(a->dtype);
    const int rb = io_detail::writer_rank(b->dtype);
    return ra != rb ? ra > rb : a->name < b->name;
  });
  std::vector<std::string_view> names;
  for (const TensorRef* t : order) names.push_back(t->name);
  std::ranges::sort(names);
  if (auto twice = std::ranges::adjacent_find(names); twice != names.end()) {
    return fail(Errc::duplicate, "two tensors are named '", *twice, "'").context(where);
  }

  std::string header = "{";
  if (!metadata.empty()) {
    json::append_quoted(header, io_detail::metadata_key);
    header += ":{";
    bool first = true;
    for (const auto& [key, value] : metadata) {
      if (!first) header += ',';
      first = false;
      json::append_quoted(header, key);
      header += ':';
      json::append_quoted(header, value);
    }
    header += '}';
  }
  std::uint64_t offset = 0;
  for (const TensorRef* t : order) {
    if (header.size() > 1) header += ',';
    json::append_quoted(header, t->name);
    header += cat(":{\"dtype\":\"", safetensors_name(t->dtype), "\",\"shape\":[");
    for (std::size_t i = 0; i < t->shape.rank(); ++i) header += cat(i ? "," : "", t->shape[i]);
    header += cat("],\"data_offsets\":[", offset, ",", offset + t->data.size(), "]}");
    offset += t->data.size();
  }
  header += '}';
  header.append((8 - header.size() % 8) % 8, ' ');

  const std::string partial = path + ".partial";
  std::FILE* f = std::fopen(partial.c_str(), "wb");
  if (f == nullptr) return fail(Errc::io, "cannot create '", partial, "': ", std::strerror(errno)).context(where);
  std::array<unsigned char, 8> length{};
  for (std::size_t i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(header.size() >> (8 * i));
  Result<void> written = io_detail::write_all(f, length.data(), length.size());
  if (written) written = io_detail::write_all(f, header.data(), header.size());
  for (const TensorRef* t : order) {
    if (written) written = io_detail::write_le(f, t->data, size_of(t->dtype));
  }
  if (std::fclose(f) != 0 && written) written = fail(Errc::io, std::strerror(errno));
  if (written && std::rename(partial.c_str(), path.c_str()) != 0) {
    written = fail(Errc::io, "cannot rename '", partial, "' to '", path, "': ", std::strerror(errno));
  }
  if (!written) {
    std::remove(partial.c_str());
    return std::move(written).error().context(where);
  }
  return ok();
}

}  // namespace teeny
