// Fuzzes the ONNX importer on models held in memory: protobuf parsing, initializers, attributes,
// every converter, the folding of constants and the graph they build. A model either imports
// into a graph that passes teeny's checks or gets an error; the limits keep any one input small.
#include <cstddef>
#include <cstdint>
#include <span>
import teeny;
import teeny.onnx;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  teeny::onnx::ImportOptions options;
  options.max_nodes = 4096;
  options.limits.max_elements = std::int64_t{1} << 22;  // 16 MiB of f32 per tensor
  auto model = teeny::onnx::import_model({reinterpret_cast<const std::byte*>(data), size}, options);
  if (model) (void)model->graph.summary();
  return 0;
}
