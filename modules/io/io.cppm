// teeny.io — files in and out: safetensors weights (read with zero-copy views or dtype
// conversion, written the way the Python library writes them, loaded strictly into a model's
// named parameters), IDX datasets such as Fashion-MNIST, and NumPy's .npy arrays.
//
//   auto file = SafetensorsFile::open("mlp.safetensors");
//   auto report = load_parameters(*file, targets);     // all problems in one error, or a LoadReport
//   auto train = load_fashion_mnist("/usr/share/datasets/fashion-mnist", DatasetSplit::train);
//   auto x = read_npy("input.npy");                     // Result<Tensor>
//
// The JSON reader (:json), the file mapping (:mapped_file) and the element converter (:convert)
// are internal partitions.
export module teeny.io;
import teeny.std;
export import :safetensors;
export import :params;
export import :idx;
export import :datasets;
export import :npy;
