// teeny.io:datasets — ready-to-train datasets read from IDX files.
//
//   auto test = load_fashion_mnist("/usr/share/datasets/fashion-mnist", DatasetSplit::test);
//   test->images.shape() == ConcreteShape{10000, 1, 28, 28};   // f32 in [0, 1]
//   test->labels.shape() == ConcreteShape{10000};              // i64 class ids 0..9
//
// Fashion-MNIST (and MNIST, which uses the same file names and format) is four IDX files:
// {train,t10k}-{images-idx3,labels-idx1}-ubyte, each optionally gzipped (".gz"; Debian's package
// dataset-fashion-mnist installs them so, in /usr/share/datasets/fashion-mnist/).
module;
#include <sys/stat.h>
export module teeny.io:datasets;
import teeny.std;
import teeny.core;
import :idx;

export namespace teeny {

enum class DatasetSplit : std::uint8_t { train, test };

inline std::string to_string(DatasetSplit s) { return s == DatasetSplit::train ? "train" : "test"; }

/// A classification dataset: `images` f32 [N, C, H, W] and `labels` i64 [N].
struct Dataset {
  Tensor images;
  Tensor labels;
  std::int64_t size() const { return labels.shape().empty() ? 0 : labels.shape()[0]; }
};

/// Reads a Fashion-MNIST split from `dir`: images as f32 [N, 1, 28, 28] scaled to [0, 1]
/// (pixel / 255, nothing else), labels as i64 [N] in 0..9. Each file may be raw or ".gz" (the raw
/// one is preferred when both exist). Errors name the file: missing, malformed, images that are
/// not u8 [N, 28, 28], labels that are not u8 [N] in 0..9, or counts that disagree.
Result<Dataset> load_fashion_mnist(const std::string& dir, DatasetSplit split);

}  // namespace teeny

namespace teeny::io_detail {

/// `dir/name`, or `dir/name.gz` when only that exists.
Result<std::string> find_idx_file(const std::string& dir, std::string_view name) {
  std::string plain = dir.empty() ? std::string(name) : cat(dir, dir.back() == '/' ? "" : "/", name);
  struct stat info{};
  if (::stat(plain.c_str(), &info) == 0) return plain;
  std::string gz = plain + ".gz";
  if (::stat(gz.c_str(), &info) == 0) return gz;
  return fail(Errc::not_found, "neither '", plain, "' nor '", gz, "' exists");
}

}  // namespace teeny::io_detail

namespace teeny {

Result<Dataset> load_fashion_mnist(const std::string& dir, DatasetSplit split) {
  const std::string where = cat("Fashion-MNIST ", split, " split in '", dir, "'");
  const std::string_view prefix = split == DatasetSplit::train ? "train" : "t10k";
  auto images_path = io_detail::find_idx_file(dir, cat(prefix, "-images-idx3-ubyte"));
  if (!images_path) return std::move(images_path).error().context(where);
  auto labels_path = io_detail::find_idx_file(dir, cat(prefix, "-labels-idx1-ubyte"));
  if (!labels_path) return std::move(labels_path).error().context(where);

  auto images = read_idx(*images_path);
  if (!images) return std::move(images).error().context(where);
  auto labels = read_idx(*labels_path);
  if (!labels) return std::move(labels).error().context(where);

  const ConcreteShape& is = images->shape;
  if (images->dtype != DType::u8 || is.rank() != 3 || is[1] != 28 || is[2] != 28) {
    return fail(Errc::shape_mismatch, "'", *images_path, "' holds ", images->dtype, " ", is,
                ", not u8 [N, 28, 28] images")
        .context(where);
  }
  const ConcreteShape& ls = labels->shape;
  if (labels->dtype != DType::u8 || ls.rank() != 1) {
    return fail(Errc::shape_mismatch, "'", *labels_path, "' holds ", labels->dtype, " ", ls, ", not u8 [N] labels")
        .context(where);
  }
  if (ls[0] != is[0]) {
    return fail(Errc::shape_mismatch, ls[0], " labels in '", *labels_path, "' but ", is[0], " images in '",
                *images_path, "'")
        .context(where);
  }

  const std::int64_t n = is[0];
  Dataset out;
  auto image_tensor = Tensor::zeros(DType::f32, {n, 1, 28, 28});
  if (!image_tensor) return std::move(image_tensor).error().context(where);
  auto label_tensor = Tensor::zeros(DType::i64, {n});
  if (!label_tensor) return std::move(label_tensor).error().context(where);
  out.images = std::move(*image_tensor);
  out.labels = std::move(*label_tensor);

  const auto* pixels = reinterpret_cast<const std::uint8_t*>(images->data.data());
  auto* scaled = reinterpret_cast<float*>(out.images.data());
  const auto count = static_cast<std::size_t>(images->data.numel());
  for (std::size_t i = 0; i < count; ++i) scaled[i] = static_cast<float>(pixels[i]) / 255.0f;

  const auto* classes = reinterpret_cast<const std::uint8_t*>(labels->data.data());
  auto* ids = reinterpret_cast<std::int64_t*>(out.labels.data());
  for (std::int64_t i = 0; i < n; ++i) {
    if (classes[i] > 9) {
      return fail(Errc::parse, "label ", i, " in '", *labels_path, "' is ", classes[i], ", not a class 0..9")
          .context(where);
    }
    ids[i] = classes[i];
  }
  return out;
}

}  // namespace teeny
