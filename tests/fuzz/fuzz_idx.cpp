// Fuzzes the IDX reader on arrays held in memory, raw or gzip-compressed (the gzip magic decides;
// the seed corpus holds both), with the reader's checks on magic, type code, dims and size.
#include <cstddef>
#include <cstdint>
#include <span>
import teeny;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto array = teeny::parse_idx({reinterpret_cast<const std::byte*>(data), size}, "fuzz.idx");
  if (array && array->data.numel() != array->shape.numel()) __builtin_trap();
  return 0;
}
