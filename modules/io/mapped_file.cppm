// teeny.io:mapped_file — read-only bytes of a whole file, memory-mapped (POSIX mmap) and unmapped
// when the last owner goes away; or bytes held in memory, behind the same interface. Internal to
// teeny.io.
//
//   auto f = MappedFile::open("model.safetensors");   // Result<MappedFile>
//   std::span<const std::byte> bytes = f->bytes();    // valid while f lives (moves keep it valid)
module;
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
module teeny.io:mapped_file;
import teeny.std;
import teeny.core;

namespace teeny::io_detail {

/// The bytes of a file, mapped read-only; or a copy held in an aligned Buffer.
class MappedFile {
 public:
  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept { swap(other); }
  MappedFile& operator=(MappedFile&& other) noexcept {
    MappedFile gone(std::move(other));
    swap(gone);
    return *this;
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile() {
    if (mapping_ != nullptr) ::munmap(mapping_, size_);
  }

  /// Maps `path`. A missing path, a directory, a non-regular or an empty file is an error naming it.
  static Result<MappedFile> open(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      return fail(err == ENOENT ? Errc::not_found : Errc::io, "cannot open '", path, "': ", std::strerror(err));
    }
    struct stat info{};
    if (::fstat(fd, &info) != 0) {
      const int err = errno;
      ::close(fd);
      return fail(Errc::io, "cannot stat '", path, "': ", std::strerror(err));
    }
    if (S_ISDIR(info.st_mode)) {
      ::close(fd);
      return fail(Errc::io, "'", path, "' is a directory, not a file");
    }
    if (!S_ISREG(info.st_mode)) {
      ::close(fd);
      return fail(Errc::io, "'", path, "' is not a regular file");
    }
    MappedFile file;
    file.size_ = static_cast<std::size_t>(info.st_size);
    if (file.size_ == 0) {  // mmap refuses length 0; the caller reports what an empty file lacks
      ::close(fd);
      return file;
    }
    void* p = ::mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    const int err = errno;
    ::close(fd);  // the mapping keeps the file alive
    if (p == MAP_FAILED)
      return fail(Errc::io, "cannot map '", path, "' (", info.st_size, " bytes): ", std::strerror(err));
    file.mapping_ = p;
    return file;
  }

  /// Holds a copy of `bytes` (64-byte aligned, like a mapping's page-aligned start).
  static Result<MappedFile> copy_of(std::span<const std::byte> bytes) {
    auto buffer = Buffer::allocate(bytes.size());
    if (!buffer) return std::move(buffer).error();
    if (!bytes.empty()) std::memcpy(buffer->data(), bytes.data(), bytes.size());
    MappedFile file;
    file.size_ = bytes.size();
    file.owned_ = std::move(*buffer);
    return file;
  }

  std::span<const std::byte> bytes() const {
    if (mapping_ != nullptr) return {static_cast<const std::byte*>(mapping_), size_};
    return {owned_.data(), owned_.size()};
  }

 private:
  void swap(MappedFile& other) noexcept {
    std::swap(mapping_, other.mapping_);
    std::swap(size_, other.size_);
    std::swap(owned_, other.owned_);
  }

  void* mapping_ = nullptr;
  std::size_t size_ = 0;
  Buffer owned_;
};

}  // namespace teeny::io_detail
