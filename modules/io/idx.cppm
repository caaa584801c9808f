// teeny.io:idx — reads IDX arrays, the format of MNIST and Fashion-MNIST, raw or gzip-compressed.
//
// An IDX file is two zero bytes, a type code (0x08 u8, 0x09 i8, 0x0B i16, 0x0C i32, 0x0D f32,
// 0x0E f64), the number of dims, each dim as a big-endian u32, then the big-endian elements in
// row-major order.
//
//   auto labels = read_idx("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz");
//   labels->dtype == DType::u8;  labels->shape == ConcreteShape{10000};
//   auto v = labels->data.view<std::uint8_t>();
module;
#include <sys/stat.h>
#include <zlib.h>

#include <cerrno>
export module teeny.io:idx;
import teeny.std;
import teeny.core;

export namespace teeny {

/// An IDX array: its element type and shape, and the elements (native byte order).
struct IdxArray {
  DType dtype = DType::u8;
  ConcreteShape shape;
  Tensor data;
};

/// Reads an IDX file, gzip-compressed or not (detected from its content). Errors name the file:
/// missing (Errc::not_found), unreadable or corrupt gzip (io), wrong magic, unknown type code, more
/// than 8 dims, or a size that does not match the dims (parse).
Result<IdxArray> read_idx(const std::string& path);
/// Parses an IDX image held in memory, gzip-compressed or not (gzip's magic 1f 8b says which), with
/// the checks and errors of read_idx; `name` stands for the path in errors.
Result<IdxArray> parse_idx(std::span<const std::byte> bytes, std::string_view name = "<memory>");

}  // namespace teeny

namespace teeny::io_detail {

std::optional<DType> idx_dtype(unsigned code) {
  switch (code) {
    case 0x08: return DType::u8;
    case 0x09: return DType::i8;
    case 0x0B: return DType::i16;
    case 0x0C: return DType::i32;
    case 0x0D: return DType::f32;
    case 0x0E: return DType::f64;
    default: return std::nullopt;
  }
}

/// The whole (decompressed) content of a file.
Result<std::vector<unsigned char>> read_whole(const std::string& path) {
  struct stat info{};
  if (::stat(path.c_str(), &info) != 0) {
    const int err = errno;
    return fail(err == ENOENT ? Errc::not_found : Errc::io, "cannot open: ", std::strerror(err));
  }
  if (S_ISDIR(info.st_mode)) return fail(Errc::io, "is a directory, not a file");
  gzFile file = gzopen(path.c_str(), "rb");  // reads plain files unchanged
  if (file == nullptr) return fail(Errc::io, "cannot open: ", std::strerror(errno != 0 ? errno : ENOMEM));
  std::vector<unsigned char> bytes;
  constexpr unsigned chunk = 1u << 20;
  while (true) {
    const std::size_t have = bytes.size();
    bytes.resize(have + chunk);
    const int n = gzread(file, bytes.data() + have, chunk);
    if (n < 0) {
      int code = 0;
      const std::string why = gzerror(file, &code);
      gzclose(file);
      return fail(Errc::io, "cannot read: ", why);
    }
    bytes.resize(have + static_cast<std::size_t>(n));
    if (n == 0) break;
  }
  int code = Z_OK;
  const std::string why = gzerror(file, &code);
  gzclose(file);
  if (code != Z_OK && code != Z_STREAM_END) return fail(Errc::io, "corrupt or truncated gzip data: ", why);
  return bytes;
}

/// Inflates gzip data held in memory. Like gzread, it reads members one after another and ignores
/// what follows the last one when that is not another gzip member.
Result<std::vector<unsigned char>> gunzip(std::span<const std::byte> in) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) return fail(Errc::io, "cannot start inflating: out of memory");
  std::vector<unsigned char> out;
  std::size_t at = 0;  // input consumed
  constexpr std::size_t chunk = std::size_t{1} << 16;
  int status = Z_OK;
  while (true) {
    // uInt is 32 bits: feed and drain at most a chunk at a time.
    z.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(in.data() + at));
    z.avail_in = static_cast<uInt>(std::min(in.size() - at, chunk));
    const std::size_t have = out.size();
    out.resize(have + chunk);
    z.next_out = out.data() + have;
    z.avail_out = static_cast<uInt>(chunk);
    const uInt fed = z.avail_in;
    status = inflate(&z, Z_NO_FLUSH);
    at += fed - z.avail_in;
    out.resize(have + chunk - z.avail_out);
    if (status == Z_STREAM_END) {
      const bool another = in.size() - at >= 2 && in[at] == std::byte{0x1f} && in[at + 1] == std::byte{0x8b};
      if (!another) break;
      inflateReset(&z);
      continue;
    }
    if (status == Z_BUF_ERROR && at == in.size() && z.avail_out != 0) break;  // input ends mid-stream
    if (status != Z_OK && status != Z_BUF_ERROR) break;
  }
  const std::string why = z.msg != nullptr ? z.msg : "";
  inflateEnd(&z);
  if (status != Z_STREAM_END) {
    return fail(Errc::io, "corrupt or truncated gzip data: ", why.empty() ? "unexpected end of data" : why);
  }
  return out;
}

/// The IDX array in `bytes` (decompressed); `where` names the source in errors.
Result<IdxArray> parse_idx_bytes(std::span<const unsigned char> bytes, const std::string& where);

}  // namespace teeny::io_detail

namespace teeny {

Result<IdxArray> read_idx(const std::string& path) {
  const std::string where = cat("IDX file '", path, "'");
  auto content = io_detail::read_whole(path);
  if (!content) return std::move(content).error().context(where);
  return io_detail::parse_idx_bytes(*content, where);
}

Result<IdxArray> parse_idx(std::span<const std::byte> bytes, std::string_view name) {
  const std::string where = cat("IDX file '", name, "'");
  if (bytes.size() >= 2 && bytes[0] == std::byte{0x1f} && bytes[1] == std::byte{0x8b}) {
    auto content = io_detail::gunzip(bytes);
    if (!content) return std::move(content).error().context(where);
    return io_detail::parse_idx_bytes(*content, where);
  }
  return io_detail::parse_idx_bytes({reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()}, where);
}

}  // namespace teeny

namespace teeny::io_detail {

Result<IdxArray> parse_idx_bytes(std::span<const unsigned char> bytes, const std::string& where) {
  if (bytes.size() < 4) {
    return fail(Errc::parse, "truncated: ", bytes.size(), " bytes, fewer than the 4-byte magic").context(where);
  }
  if (bytes[0] != 0 || bytes[1] != 0) {
    return fail(Errc::parse, "wrong magic: an IDX file starts with two zero bytes, this one with ",
                static_cast<unsigned>(bytes[0]), " and ", static_cast<unsigned>(bytes[1]), " (not an IDX file?)")
        .context(where);
  }
  const auto dtype = io_detail::idx_dtype(bytes[2]);
  if (!dtype) {
    return fail(Errc::parse, "unknown type code ", static_cast<unsigned>(bytes[2]),
                " (supported: 8 u8, 9 i8, 11 i16, 12 i32, 13 f32, 14 f64)")
        .context(where);
  }
  const std::size_t rank = bytes[3];
  if (rank > max_rank) {
    return fail(Errc::parse, "header says ", rank, " dims; at most ", max_rank, " are supported").context(where);
  }
  const std::size_t header = 4 + 4 * rank;
  if (bytes.size() < header) {
    return fail(Errc::parse, "truncated: ", bytes.size(), " bytes, fewer than the ", header, "-byte header of ", rank,
                " dims")
        .context(where);
  }
  ConcreteShape shape;
  for (std::size_t i = 0; i < rank; ++i) {
    const unsigned char* p = bytes.data() + 4 + 4 * i;
    shape.push_back((std::int64_t{p[0]} << 24) | (std::int64_t{p[1]} << 16) | (std::int64_t{p[2]} << 8) | p[3]);
  }
  // At most 2^56 elements (numel() is exact then), so the byte count below cannot wrap either.
  auto numel = checked_numel(shape);
  if (!numel) return fail(Errc::parse, numel.error().message()).context(where);
  const std::size_t element = size_of(*dtype);
  const auto needed = static_cast<std::uint64_t>(*numel) * element;
  const std::size_t have = bytes.size() - header;
  if (needed != have) {
    return fail(Errc::parse, "dims ", shape, " of ", *dtype, " need ", needed, " bytes of data, the file has ", have,
                needed > have ? " (truncated, or absurd dims)" : " (trailing bytes)")
        .context(where);
  }
  auto tensor = Tensor::zeros(*dtype, shape);
  if (!tensor) return std::move(tensor).error().context(where);
  std::byte* out = tensor->data();
  const unsigned char* in = bytes.data() + header;
  if (element == 1 && have != 0) std::memcpy(out, in, have);
  for (std::size_t i = 0; element > 1 && i < have; i += element) {  // big-endian to native
    for (std::size_t b = 0; b < element; ++b) {
      const std::size_t from = std::endian::native == std::endian::little ? element - 1 - b : b;
      out[i + b] = static_cast<std::byte>(in[i + from]);
    }
  }
  return IdxArray{*dtype, shape, std::move(*tensor)};
}

}  // namespace teeny::io_detail
