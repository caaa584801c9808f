// Reads ONNX's protobuf messages into the plain values of proto.hpp. The only translation unit
// that includes protobuf: Debian's libonnx-dev ships the generated onnx-ml.pb.h (and libonnx_proto
// its code), which stays exactly in step with ONNX's schema, and libprotobuf's parser is the
// reference decoder every ONNX producer is tested against.
#include "onnx/proto.hpp"

#include <bit>
#include <climits>
#include <cstring>
#include <type_traits>

#include <google/protobuf/io/coded_stream.h>
#define ONNX_ML 1  // Debian ships the generated onnx-ml.pb.h (ONNX with its ML types) only
#include <onnx/onnx_pb.h>

namespace teeny::onnx::proto {
namespace {

static_assert(std::endian::native == std::endian::little, "ONNX stores tensors little-endian");

// Appends each value of a repeated field as `Stored` (the element's own width: int32_data holds
// int8..uint16, bool and the 16-bit floats' bits, uint64_data holds uint32).
template <class Stored, class Field>
void append_as(std::string& bytes, const Field& field) {
  bytes.reserve(bytes.size() + static_cast<std::size_t>(field.size()) * sizeof(Stored));
  for (const auto v : field) {
    const auto stored = static_cast<Stored>(v);
    char raw[sizeof(Stored)];
    std::memcpy(raw, &stored, sizeof(Stored));
    bytes.append(raw, sizeof(Stored));
  }
}

void read_tensor(const ::onnx::TensorProto& from, Tensor& to) {
  to.name = from.name();
  to.data_type = from.data_type();
  to.dims.assign(from.dims().begin(), from.dims().end());
  if (from.data_location() == ::onnx::TensorProto_DataLocation_EXTERNAL) {
    to.external = true;
    for (const auto& entry : from.external_data()) {
      // offset and length are decimal strings; a malformed one becomes -2, which the importer refuses
      const auto number = [](const std::string& text) -> std::int64_t {
        if (text.empty() || text.size() > 18) return -2;
        std::int64_t n = 0;
        for (const char c : text) {
          if (c < '0' || c > '9') return -2;
          n = n * 10 + (c - '0');
        }
        return n;
      };
      if (entry.key() == "location") to.location = entry.value();
      if (entry.key() == "offset") to.offset = number(entry.value());
      if (entry.key() == "length") to.length = number(entry.value());
    }
    return;
  }
  if (from.has_raw_data()) {
    to.bytes = from.raw_data();
    return;
  }
  switch (from.data_type()) {
    case float32:
    case complex64: append_as<float>(to.bytes, from.float_data()); break;
    case int32: append_as<std::int32_t>(to.bytes, from.int32_data()); break;
    case int16: append_as<std::int16_t>(to.bytes, from.int32_data()); break;
    case int8: append_as<std::int8_t>(to.bytes, from.int32_data()); break;
    case uint16:
    case float16:
    case bfloat16: append_as<std::uint16_t>(to.bytes, from.int32_data()); break;
    case uint8:
    case boolean: append_as<std::uint8_t>(to.bytes, from.int32_data()); break;
    case int64: append_as<std::int64_t>(to.bytes, from.int64_data()); break;
    case float64:
    case complex128: append_as<double>(to.bytes, from.double_data()); break;
    case uint32: append_as<std::uint32_t>(to.bytes, from.uint64_data()); break;
    case uint64: append_as<std::uint64_t>(to.bytes, from.uint64_data()); break;
    case string: to.strings.assign(from.string_data().begin(), from.string_data().end()); break;
    default: break;  // an unknown type: the importer names it
  }
}

void read_value_info(const ::onnx::ValueInfoProto& from, ValueInfo& to) {
  to.name = from.name();
  if (!from.type().has_tensor_type()) return;
  const auto& tensor = from.type().tensor_type();
  to.is_tensor = true;
  to.elem_type = tensor.elem_type();
  to.has_shape = tensor.has_shape();
  for (const auto& d : tensor.shape().dim()) {
    Dim& dim = to.dims.emplace_back();
    dim.has_value = d.has_dim_value();
    dim.value = d.dim_value();
    dim.param = d.dim_param();
  }
}

void read_graph(const ::onnx::GraphProto& from, Graph& to);

void read_attribute(const ::onnx::AttributeProto& from, Attribute& to) {
  to.name = from.name();
  to.type = static_cast<AttrType>(from.type());
  to.ref_attr_name = from.ref_attr_name();
  to.f = from.f();
  to.i = from.i();
  to.s = from.s();
  if (from.has_t()) read_tensor(from.t(), to.tensors.emplace_back());
  for (const auto& t : from.tensors()) read_tensor(t, to.tensors.emplace_back());
  if (from.has_g()) read_graph(from.g(), to.graphs.emplace_back());
  for (const auto& g : from.graphs()) read_graph(g, to.graphs.emplace_back());
  to.floats.assign(from.floats().begin(), from.floats().end());
  to.ints.assign(from.ints().begin(), from.ints().end());
  to.strings.assign(from.strings().begin(), from.strings().end());
}

void read_graph(const ::onnx::GraphProto& from, Graph& to) {
  to.name = from.name();
  to.nodes.reserve(static_cast<std::size_t>(from.node_size()));
  for (const auto& n : from.node()) {
    Node& node = to.nodes.emplace_back();
    node.name = n.name();
    node.op_type = n.op_type();
    node.domain = n.domain();
    node.inputs.assign(n.input().begin(), n.input().end());
    node.outputs.assign(n.output().begin(), n.output().end());
    for (const auto& a : n.attribute()) read_attribute(a, node.attributes.emplace_back());
  }
  for (const auto& t : from.initializer()) read_tensor(t, to.initializers.emplace_back());
  for (const auto& v : from.input()) read_value_info(v, to.inputs.emplace_back());
  for (const auto& v : from.output()) read_value_info(v, to.outputs.emplace_back());
  for (const auto& v : from.value_info()) read_value_info(v, to.value_info.emplace_back());
  to.has_sparse_initializers = from.sparse_initializer_size() > 0;
}

// Parses `bytes` as one whole message. protobuf's own limits stay (100 levels of nesting, which
// bounds subgraph depth); its 64 MiB default total is lifted to the 2 GiB a message can hold.
template <class Message>
bool parse_whole(std::span<const std::byte> bytes, Message& message, std::string& error, const char* what) {
  if (bytes.size() > static_cast<std::size_t>(INT_MAX)) {
    error = std::string(what) + " is over 2 GiB, more than protobuf can read (a larger model keeps its " +
            "weights in external data files)";
    return false;
  }
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const std::uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  in.SetTotalBytesLimit(INT_MAX);
  if (!message.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage()) {
    error = std::string("not a valid ") + what + " (protobuf could not decode it)";
    return false;
  }
  return true;
}

}  // namespace

bool parse_model(std::span<const std::byte> bytes, Model& model, std::string& error) {
  ::onnx::ModelProto proto;
  if (!parse_whole(bytes, proto, error, "ONNX model")) return false;
  model.ir_version = proto.ir_version();
  model.producer_name = proto.producer_name();
  model.producer_version = proto.producer_version();
  for (const auto& o : proto.opset_import()) model.opsets.push_back({o.domain(), o.version()});
  model.has_functions = proto.functions_size() > 0;
  if (!proto.has_graph()) {
    error = "the model has no graph";
    return false;
  }
  read_graph(proto.graph(), model.graph);
  return true;
}

bool parse_tensor(std::span<const std::byte> bytes, Tensor& tensor, std::string& error) {
  ::onnx::TensorProto proto;
  if (!parse_whole(bytes, proto, error, "ONNX TensorProto")) return false;
  read_tensor(proto, tensor);
  return true;
}

}  // namespace teeny::onnx::proto
