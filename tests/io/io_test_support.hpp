#pragma once
// Shared by the teeny.io tests: fixture lookup, a self-deleting temporary directory, byte files,
// a builder for hand-made safetensors images, a tensor's values and a substring check. Include it
// after doctest.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace io_test {

namespace fs = std::filesystem;

/// tests/fixtures/io/<name>. Found through $TEENY_FIXTURES_DIR, or from this file's path as the
/// compiler saw it (absolute, or relative to the build root, which is two levels above the test
/// binary <build>/tests/teeny-tests), or from the working directory.
inline std::string fixture(std::string_view name) {
  std::vector<fs::path> candidates;
  if (const char* env = std::getenv("TEENY_FIXTURES_DIR")) candidates.emplace_back(env);
  const fs::path here = fs::path(__FILE__).parent_path();  // .../tests/io
  if (here.is_absolute()) {
    candidates.push_back(here.parent_path() / "fixtures" / "io");
  } else {
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) candidates.push_back(exe.parent_path().parent_path() / here.parent_path() / "fixtures" / "io");
  }
  candidates.emplace_back("tests/fixtures/io");
  candidates.emplace_back("../tests/fixtures/io");
  for (const fs::path& dir : candidates) {
    std::error_code ec;
    if (fs::exists(dir / name, ec)) return (dir / name).string();
  }
  return (candidates.back() / name).string();  // the test then fails, naming this path
}

/// A fresh directory under the system temp dir, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::error_code ec;
    fs::path base = fs::temp_directory_path(ec);
    if (ec) base = "/tmp";
    std::string pattern = (base / "teeny-io-XXXXXX").string();
    if (::mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string operator/(std::string_view name) const { return (fs::path(path_) / name).string(); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::vector<std::byte> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(chars.size());
  for (std::size_t i = 0; i < chars.size(); ++i) out[i] = static_cast<std::byte>(chars[i]);
  return out;
}

inline void write_bytes(const std::string& path, std::span<const std::byte> bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline void write_bytes(const std::string& path, std::span<const std::uint8_t> bytes) {
  write_bytes(path, std::as_bytes(bytes));
}

/// A safetensors image: the little-endian length of `header`, `header` itself (not padded), then
/// `data_size` bytes 0, 1, 2, ... of data.
inline std::vector<std::byte> safetensors_image(std::string_view header, std::size_t data_size) {
  std::vector<std::byte> out;
  const std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::byte>(n >> (8 * i)));
  for (char c : header) out.push_back(static_cast<std::byte>(c));
  for (std::size_t i = 0; i < data_size; ++i) out.push_back(static_cast<std::byte>(i));
  return out;
}

/// A tensor's elements as T (the test stops when T is not its dtype).
template <class T, class TensorT>
std::vector<T> values_of(const TensorT& t) {
  auto v = t.template view<T>();
  REQUIRE(v);
  return {v->span().begin(), v->span().end()};
}

inline bool contains(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

template <class T>
std::span<const std::byte> bytes_of(const std::vector<T>& values) {
  return std::as_bytes(std::span<const T>(values));
}

template <class T>
std::span<std::byte> writable_bytes_of(std::vector<T>& values) {
  return std::as_writable_bytes(std::span<T>(values));
}

}  // namespace io_test
