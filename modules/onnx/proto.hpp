#pragma once
// The ONNX file as plain C++ values: what modules/onnx/proto.cpp reads out of the protobuf
// messages. Only this header crosses from the protobuf translation unit into teeny.onnx, so
// teeny's modules and their importers never see a protobuf type (nor need its flags or its
// headers). Field names follow onnx.proto; values are copied as stored, not yet checked against
// ONNX's rules (the importer does that, with node names in its errors).
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace teeny::onnx::proto {

/// TensorProto.DataType's values (onnx.proto), kept as numbers: an unknown one must reach the
/// importer, which names it in its error.
enum DataType : std::int32_t {
  undefined = 0,
  float32 = 1,
  uint8 = 2,
  int8 = 3,
  uint16 = 4,
  int16 = 5,
  int32 = 6,
  int64 = 7,
  string = 8,
  boolean = 9,
  float16 = 10,
  float64 = 11,
  uint32 = 12,
  uint64 = 13,
  complex64 = 14,
  complex128 = 15,
  bfloat16 = 16,
};

/// A tensor (an initializer, a Constant's value, a test's input or output).
struct Tensor {
  std::string name;
  std::int32_t data_type = undefined;
  std::vector<std::int64_t> dims;
  // The elements as little-endian bytes of data_type, whichever field the file used (raw_data or
  // the typed fields: float_data, int32_data, int64_data, double_data, uint64_data).
  std::string bytes;
  std::vector<std::string> strings;  // a STRING tensor's elements
  // Where the elements are when stored outside the file (data_location EXTERNAL).
  bool external = false;
  std::string location;      // relative to the model's folder
  std::int64_t offset = 0;   // bytes into the file
  std::int64_t length = -1;  // bytes; -1: to the end of the file
};

/// One dim of a value's declared shape: a size, a named dim (dim_param) or neither (unknown).
struct Dim {
  bool has_value = false;
  std::int64_t value = 0;
  std::string param;
};

/// A graph input, output or value_info entry.
struct ValueInfo {
  std::string name;
  bool is_tensor = false;  // false: a sequence, map or optional type
  std::int32_t elem_type = undefined;
  bool has_shape = false;  // false: the rank is unknown too
  std::vector<Dim> dims;
};

struct Graph;

/// AttributeProto.AttributeType's values.
enum class AttrType : std::int32_t {
  undefined = 0,
  f = 1,
  i = 2,
  s = 3,
  t = 4,
  g = 5,
  floats = 6,
  ints = 7,
  strings = 8,
  tensors = 9,
  graphs = 10,
  sparse_tensor = 11,
  sparse_tensors = 12,
  type_proto = 13,
  type_protos = 14,
};

struct Attribute {
  std::string name;
  AttrType type = AttrType::undefined;
  std::string ref_attr_name;  // set inside a function body: the value comes from the caller
  float f = 0;
  std::int64_t i = 0;
  std::string s;
  std::vector<Tensor> tensors;  // t (one) or tensors
  std::vector<Graph> graphs;    // g (one) or graphs: If, Loop and Scan bodies
  std::vector<float> floats;
  std::vector<std::int64_t> ints;
  std::vector<std::string> strings;
};

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;                // "" and "ai.onnx" are the default domain
  std::vector<std::string> inputs;   // "" for an omitted optional input
  std::vector<std::string> outputs;  // "" for an omitted optional output
  std::vector<Attribute> attributes;
};

struct Graph {
  std::string name;
  std::vector<Node> nodes;
  std::vector<Tensor> initializers;
  std::vector<ValueInfo> inputs;
  std::vector<ValueInfo> outputs;
  std::vector<ValueInfo> value_info;
  bool has_sparse_initializers = false;
};

struct OpsetImport {
  std::string domain;
  std::int64_t version = 0;
};

struct Model {
  std::int64_t ir_version = 0;
  std::string producer_name;
  std::string producer_version;
  std::vector<OpsetImport> opsets;
  bool has_functions = false;  // model-local functions (IR 8): not imported
  Graph graph;
};

/// Reads a serialized ModelProto. On failure, returns false and says why in `error`.
bool parse_model(std::span<const std::byte> bytes, Model& model, std::string& error);

/// Reads a serialized TensorProto (the ONNX test data's input_N.pb / output_N.pb).
bool parse_tensor(std::span<const std::byte> bytes, Tensor& tensor, std::string& error);

}  // namespace teeny::onnx::proto
