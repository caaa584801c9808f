// teeny.io — files in and out: safetensors weights (read with zero-copy views or dtype
// conversion, written the way the Python library writes them, loaded strictly into a model's
// named parameters) and IDX datasets such as Fashion-MNIST.
//
//   auto file = SafetensorsFile::open("mlp.safetensors");
//   auto report = load_parameters(*file, targets);     // all problems in one error, or a LoadReport
//   auto train = load_fashion_mnist("/usr/share/datasets/fashion-mnist", DatasetSplit::train);
//
// The JSON reader (:json), the file mapping (:mapped_file) and the element converter (:convert)
// are internal partitions.
export module teeny.io;
export import :safetensors;
export import :params;
export import :idx;
export import :datasets;
