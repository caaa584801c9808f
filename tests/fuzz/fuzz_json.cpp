// Fuzzes teeny.io's JSON reader. It is internal to teeny.io, so the input reaches it as the header
// of a safetensors image held in memory: an 8-byte length, then the input as the header JSON.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>
import teeny;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::byte> image(8 + size);
  for (std::size_t i = 0; i < 8; ++i) image[i] = static_cast<std::byte>(static_cast<std::uint64_t>(size) >> (8 * i));
  if (size != 0) std::memcpy(image.data() + 8, data, size);
  auto file = teeny::SafetensorsFile::parse(image, "fuzz.json");
  if (file) (void)file->metadata().size();
  return 0;
}
