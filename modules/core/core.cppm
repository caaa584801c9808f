// teeny.core — the vocabulary every other module speaks: element types (dtype), errors as values
// (Result/Error), shapes with symbolic dims, tensor views and buffers, and the DAG.
export module teeny.core;
import teeny.std;
export import :dtype;
export import :error;
export import :shape;
export import :tensor;
export import :dag;
