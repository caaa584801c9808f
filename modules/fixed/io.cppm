// teeny.fixed.io — a typed model's weights from a safetensors file (teeny.io), by PyTorch key. Not
// in an embedded build, which has no files: there the weights are compiled in (teeny-embed-weights)
// or handed over as TensorRefs.
//
//   alignas(64) static std::byte image[decltype(mlp)::param_bytes];
//   auto report = tf::read_weights<decltype(mlp)::network>(*file, image);   // Result<LoadReport>
//   mlp.load(image);
export module teeny.fixed.io;
import teeny.std;
import teeny.core;
import teeny.io;
import teeny.fixed;

export namespace teeny::fixed {

/// Fills `image` (Net::param_bytes, laid out as Net::param_offsets) from a safetensors file by
/// PyTorch key, with the run-time path's checks: strict by default (every missing, unexpected,
/// mis-shaped or unconvertible key in one error, nothing written), floating dtypes converted.
template <class Net>
Result<LoadReport> read_weights(const ParamSource& source, std::span<std::byte> image, LoadOptions options = {}) {
  if (image.size() != Net::param_bytes) {
    return fail(Errc::invalid_argument, "weight image: ", image.size(), " bytes, but the model's parameters take ",
                Net::param_bytes);
  }
  std::vector<ParamTarget> targets;
  for (std::size_t i = 0; i < Net::params.size(); ++i) {
    const ParamSpec& p = Net::params[i];
    const auto bytes = static_cast<std::size_t>(p.shape.numel()) * size_of(p.dtype);
    targets.push_back({std::string(p.key), p.dtype, p.shape, image.subspan(Net::param_offsets[i], bytes)});
  }
  return load_parameters(source, targets, options);
}
template <class Net>
Result<LoadReport> read_weights(const SafetensorsFile& file, std::span<std::byte> image, LoadOptions options = {}) {
  return read_weights<Net>(ParamSource::of(file), image, options);
}

}  // namespace teeny::fixed
