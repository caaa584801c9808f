// Fuzzes the safetensors reader on images held in memory: parse, then read every tensor (in its
// own dtype and converted), view it in place, and load it with the strict and the lenient loader
// into the parameters of a small fixed model. Nothing may crash; every failure is an error value.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>
import teeny;

namespace {

using teeny::DType;

// Where a model's parameters live: fc1/fc2 of an MLP (f32), a step counter (i64), a running
// mean kept in f64 and an f16 scale, so that each conversion path is reached.
struct Model {
  std::vector<std::byte> w1 = std::vector<std::byte>(4 * 3 * 4), b1 = std::vector<std::byte>(4 * 4),
                         w2 = std::vector<std::byte>(2 * 4 * 4), b2 = std::vector<std::byte>(2 * 4),
                         step = std::vector<std::byte>(8), mean = std::vector<std::byte>(3 * 8),
                         scale = std::vector<std::byte>(2);
  std::vector<teeny::ParamTarget> targets() {
    return {{"fc1.weight", DType::f32, {4, 3}, w1}, {"fc1.bias", DType::f32, {4}, b1},
            {"fc2.weight", DType::f32, {2, 4}, w2}, {"fc2.bias", DType::f32, {2}, b2},
            {"step", DType::i64, {1}, step},        {"bn.running_mean", DType::f64, {3}, mean},
            {"scale", DType::f16, {}, scale}};
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  auto file = teeny::SafetensorsFile::parse(bytes, "fuzz.safetensors");
  if (!file) return 0;
  for (const teeny::SafetensorsEntry& e : file->entries()) {
    (void)file->read(e, e.dtype);
    (void)file->read(e, DType::f32);
    (void)file->read(e, DType::i32);
    (void)file->view<float>(e);
    (void)file->view<bool>(e);
    (void)file->find(e.name);
  }
  Model model;
  const auto targets = model.targets();
  (void)teeny::load_parameters(*file, targets);
  (void)teeny::load_parameters(*file, targets, {.strict = false});
  (void)teeny::load_parameters(teeny::ParamSource::of(*file).without_prefix("fc2."), targets, {.dry_run = true});
  return 0;
}
