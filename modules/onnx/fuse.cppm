// teeny.onnx:fuse — what the import converts of a graph whose exporter spelled out an op teeny has
// whole: x * sigmoid(x), PyTorch's nn.SiLU (ONNX has no SiLU before opset 22 and exports it as
// Sigmoid then Mul), becomes one SiLU, which the CPU lowering then fuses into the convolution or
// Linear before it (one pass over the activations instead of three).
module;
#include "onnx/proto.hpp"
export module teeny.onnx:fuse;
import teeny.std;
import teeny.core;
import teeny.graph;
import :context;
import :converters;

export namespace teeny::onnx {

/// A node converted in place of a node of the file (the same name and outputs).
struct FusedNode {
  proto::Node node;
  ConvertFn convert;
};

/// The import's view of a graph's nodes: node i is dropped when skip[i] (a fused node does its
/// work), and converted as *fused[i] when that is set.
struct Fusions {
  std::vector<bool> skip;
  std::vector<std::optional<FusedNode>> fused;
};

/// Finds x * sigmoid(x) (either operand order) where the Mul is the sigmoid's only reader and the
/// sigmoid's output is not a graph output. None in a graph with subgraphs (an If, Loop or Scan
/// body may read any of its values).
Fusions find_fusions(const proto::Graph& g);
/// Every node as written.
Fusions no_fusions(const proto::Graph& g);

}  // namespace teeny::onnx

namespace teeny::onnx {

Fusions no_fusions(const proto::Graph& g) {
  return Fusions{std::vector<bool>(g.nodes.size(), false), std::vector<std::optional<FusedNode>>(g.nodes.size())};
}

Fusions find_fusions(const proto::Graph& g) {
  Fusions f = no_fusions(g);
  for (const proto::Node& node : g.nodes) {
    for (const proto::Attribute& a : node.attributes) {
      if (!a.graphs.empty()) return f;
    }
  }
  std::map<std::string_view, std::size_t> readers;
  for (const proto::Node& node : g.nodes) {
    for (const std::string& in : node.inputs) {
      if (!in.empty()) ++readers[in];
    }
  }
  for (const proto::ValueInfo& out : g.outputs) ++readers[out.name];
  std::map<std::string_view, std::size_t> sigmoid_of;  // a Sigmoid's output -> its node
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const proto::Node& s = g.nodes[i];
    if (is_default_domain(s.domain) && s.op_type == "Sigmoid" && s.inputs.size() == 1 && !s.inputs[0].empty() &&
        s.outputs.size() == 1 && !s.outputs[0].empty()) {
      sigmoid_of.emplace(s.outputs[0], i);
    }
  }
  for (std::size_t j = 0; j < g.nodes.size(); ++j) {
    const proto::Node& m = g.nodes[j];
    if (!is_default_domain(m.domain) || m.op_type != "Mul" || m.inputs.size() != 2 || m.outputs.size() != 1) continue;
    for (std::size_t k = 0; k < 2; ++k) {
      const auto s = sigmoid_of.find(m.inputs[k]);
      if (s == sigmoid_of.end() || s->second > j || f.skip[s->second]) continue;
      const std::string& x = g.nodes[s->second].inputs[0];
      if (m.inputs[1 - k] != x || readers[m.inputs[k]] != 1) continue;
      f.skip[s->second] = true;
      f.fused[j] = FusedNode{proto::Node{m.name, m.op_type, m.domain, {x}, m.outputs, {}}, convert::unary<SiLU>};
      break;
    }
  }
  return f;
}

}  // namespace teeny::onnx
