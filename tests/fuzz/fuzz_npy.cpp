// Fuzzes the .npy reader on files held in memory: the magic and version, the header's Python
// literal (keys, strings, booleans, shape tuples), dtypes, byte order, Fortran order and size.
#include <cstddef>
#include <cstdint>
#include <span>
import teeny;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto tensor = teeny::parse_npy({reinterpret_cast<const std::byte*>(data), size}, "fuzz.npy");
  if (tensor && tensor->bytes() != static_cast<std::size_t>(tensor->numel()) * teeny::size_of(tensor->dtype())) {
    __builtin_trap();
  }
  return 0;
}
