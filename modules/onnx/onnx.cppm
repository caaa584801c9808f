// teeny.onnx — models from ONNX files: the graph (node and value names from the file), its
// weights as a parameter source, its inputs and outputs, in one call; or straight onto the CPU.
//
//   auto model = teeny::onnx::load_cpu("resnet18.onnx", {{"batch", 8}});   // Result<CpuModel>
//   auto imported = teeny::onnx::import_model("model.onnx");                // Result<ImportedModel>
//   imported->graph;  imported->params();  imported->inputs[0].shape;
//
// Its own module and library (teeny-onnx): it links protobuf, which nothing else in teeny needs,
// and whose types never leave modules/onnx/proto.cpp. Which ops import: converters.cppm's list.
module;
#include <climits>
#include <memory>  // std::make_shared (modules/std.cppm says why it is not there)

#include "onnx/proto.hpp"
export module teeny.onnx;
import teeny.std;
export import :tensors;
export import :context;
export import :converters;
import :fuse;
import teeny.core;
import teeny.cpu;
import teeny.graph;
import teeny.io;
import teeny.runtime;

export namespace teeny::onnx {

/// A converter the user supplies for an op of their own domain (or to override one of the default
/// domain's): it adds the user's ops to the node's builder, e.g. a CustomOp of theirs.
struct CustomConverter {
  std::string domain;
  std::string op_type;
  std::function<Result<void>(NodeContext&)> convert;
};

struct ImportOptions {
  /// Graph inputs taken as constants, their values given now (a model that declares its weights
  /// as inputs, as ONNX's operator tests do). Borrowed for the import only.
  std::span<const TensorRef> constant_inputs{};
  std::vector<CustomConverter> converters{};
  TensorLimits limits{};
  std::size_t max_nodes = 1'000'000;
  std::size_t max_file_bytes = INT_MAX;  // protobuf reads at most 2 GiB in one message
  /// Import-time fusions (teeny.onnx:fuse: x * sigmoid(x) as one SiLU). Off, every node imports as
  /// written; off too when `converters` overrides Sigmoid or Mul.
  bool fuse = true;
};

/// A graph input or output: its name, dtype and dims (a dim_param is a symbolic dim; an
/// unnamed dynamic dim gets the name "<value>_dim<i>").
struct ValueDesc {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
};

struct ImportedModel {
  Graph graph;
  std::vector<NamedTensor> weights;  // keyed as the graph's parameters ("<node>.weight")
  std::vector<ValueDesc> inputs;
  std::vector<ValueDesc> outputs;
  std::vector<std::pair<std::string, std::int64_t>> opsets;  // domain ("" the default), version
  std::string producer;                                      // e.g. "pytorch 1.13.1"
  std::int64_t ir_version = 0;

  /// The weights as a source for load_weights (borrows this model's tensors).
  Result<ParamSource> params() const;
};

/// Imports the ONNX file at `path` (external data files are read from its folder).
Result<ImportedModel> import_model(const std::string& path, const ImportOptions& options = {});
/// Imports a serialized ModelProto (no external data).
Result<ImportedModel> import_model(std::span<const std::byte> bytes, const ImportOptions& options = {});

/// Imports `path` and loads it on the CPU for the sizes in `dims`, with its weights.
Result<CpuModel> load_cpu(const std::string& path, const Bindings& dims, const ImportOptions& options = {},
                          CpuOptions cpu = {});

/// Reads a serialized TensorProto file (the ONNX test data's input_0.pb).
Result<NamedTensor> read_tensor_file(const std::string& path);

}  // namespace teeny::onnx

namespace teeny::onnx {
namespace {

Result<ValueDesc> describe(const proto::ValueInfo& v) {
  if (!v.is_tensor) return fail(Errc::unsupported, "'", v.name, "' is not a tensor (a sequence, map or optional)");
  auto dtype = dtype_from_onnx(v.elem_type);
  if (!dtype) return std::move(dtype).error().context(cat("'", v.name, "'"));
  if (!v.has_shape) return fail(Errc::unsupported, "'", v.name, "' has no declared shape (its rank is unknown)");
  if (v.dims.size() > max_rank) return fail(Errc::unsupported, "'", v.name, "' has rank ", v.dims.size());
  std::vector<Dim> dims;
  for (std::size_t i = 0; i < v.dims.size(); ++i) {
    const proto::Dim& d = v.dims[i];
    if (d.has_value) {
      if (d.value < 0) return fail(Errc::invalid_argument, "'", v.name, "' dim ", i, " is ", d.value);
      dims.emplace_back(d.value);
    } else {
      dims.push_back(Dim::sym(d.param.empty() ? cat(v.name, "_dim", i) : d.param));
    }
  }
  return ValueDesc{v.name, *dtype, Shape(std::move(dims))};
}

// One line of the unsupported-nodes error.
struct Unsupported {
  std::string node;
  std::string op_type;
  std::string domain;
  std::int64_t opset = 0;
  std::string reason;
};

Result<ImportedModel> import_parsed(proto::Model& parsed, ExternalData external, const ImportOptions& options) {
  // Graph has no empty state: the model is put together once its graph is built.
  std::vector<ValueDesc> inputs;
  std::vector<ValueDesc> outputs;
  std::vector<std::pair<std::string, std::int64_t>> imported_opsets;
  std::int64_t opset = 0;
  std::map<std::string, std::int64_t, std::less<>> opsets;
  for (const proto::OpsetImport& o : parsed.opsets) {
    const std::string domain = is_default_domain(o.domain) ? "" : o.domain;
    imported_opsets.emplace_back(domain, o.version);
    opsets[domain] = o.version;
    if (domain.empty()) opset = o.version;
  }
  if (opset == 0 && parsed.ir_version >= 3)
    return fail(Errc::invalid_argument, "the model imports no default-domain opset");
  if (opset == 0) opset = 1;
  if (opset < 1 || opset > 21) {
    return fail(Errc::unsupported, "the model uses opset ", opset, " of the default domain; teeny imports 1 to 21");
  }
  const proto::Graph& g = parsed.graph;
  if (g.nodes.size() > options.max_nodes) {
    return fail(Errc::out_of_range, "the graph has ", g.nodes.size(), " nodes, over the limit of ", options.max_nodes);
  }
  if (g.has_sparse_initializers) return fail(Errc::unsupported, "sparse initializers");
  if (parsed.has_functions) return fail(Errc::unsupported, "model-local functions (IR 8)");

  auto state = std::make_unique<ImportState>();
  state->external = std::move(external);
  state->limits = options.limits;
  for (const proto::Tensor& t : g.initializers) {
    auto tensor = to_tensor(t, state->external, state->limits);
    if (!tensor) return std::move(tensor).error().context(cat("initializer '", t.name, "'"));
    if (!state->values
             .emplace(t.name, ImportValue{{}, std::make_shared<const Tensor>(std::move(*tensor)), nullptr, true})
             .second) {
      return fail(Errc::duplicate, "two initializers are named '", t.name, "'");
    }
  }
  for (const TensorRef& c : options.constant_inputs) {
    auto tensor = Tensor::zeros(c.dtype, c.shape);
    if (!tensor) return std::move(tensor).error();
    if (c.data.size() != tensor->bytes()) {
      return fail(Errc::shape_mismatch, "constant input '", c.name, "': ", c.data.size(), " bytes for ", c.dtype, " ",
                  c.shape);
    }
    if (!c.data.empty()) std::memcpy(tensor->data(), c.data.data(), c.data.size());
    state->values[std::string(c.name)] = ImportValue{{}, std::make_shared<const Tensor>(std::move(*tensor)), nullptr};
  }
  for (const proto::ValueInfo& in : g.inputs) {
    if (state->values.contains(in.name)) continue;  // an initializer (listed as an input before IR 4)
    auto desc = describe(in);
    if (!desc) return std::move(desc).error().context("graph input");
    state->names.insert(in.name);
    state->values[in.name] = ImportValue{state->builder.input(in.name, desc->dtype, desc->shape), nullptr, nullptr};
    inputs.push_back(std::move(*desc));
  }

  std::vector<Unsupported> unsupported;
  std::vector<std::string> errors;
  Errc errors_code = Errc::invalid_argument;  // theirs when every error has one code
  const auto add_error = [&](Errc code, std::string message) {
    errors_code = errors.empty() || code == errors_code ? code : Errc::invalid_argument;
    errors.push_back(std::move(message));
  };
  std::set<std::string, std::less<>> unavailable;  // outputs of nodes that did not import
  const bool overridden = std::ranges::any_of(options.converters, [](const CustomConverter& c) {
    return is_default_domain(c.domain) && (c.op_type == "Sigmoid" || c.op_type == "Mul");
  });
  const Fusions fusions = options.fuse && !overridden ? find_fusions(g) : no_fusions(g);
  for (std::size_t index = 0; index < g.nodes.size(); ++index) {
    if (fusions.skip[index]) continue;  // a fused node reads its input and writes its output
    const std::optional<FusedNode>& fused = fusions.fused[index];
    const proto::Node& node = fused ? fused->node : g.nodes[index];
    const std::string label = node.name.empty() ? cat(node.op_type, "_", index) : node.name;
    const auto skip = [&] {
      for (const std::string& out : node.outputs) unavailable.insert(out);
    };
    bool blocked = false;
    std::string undefined;
    for (const std::string& in : node.inputs) {
      if (in.empty()) continue;
      if (unavailable.contains(in))
        blocked = true;
      else if (!state->values.contains(in) && undefined.empty())
        undefined = in;
    }
    if (blocked) {  // its input's node is already reported
      skip();
      continue;
    }
    if (!undefined.empty()) {
      add_error(Errc::not_found,
                cat("node '", label, "' (", node.op_type, "): input '", undefined,
                    "' is not defined before it (a graph input, an initializer or an earlier node's output)"));
      skip();
      continue;
    }
    const std::string domain = is_default_domain(node.domain) ? "" : node.domain;
    std::function<Result<void>(NodeContext&)> convert;
    for (const CustomConverter& c : options.converters) {
      if ((is_default_domain(c.domain) ? "" : c.domain) == domain && c.op_type == node.op_type) convert = c.convert;
    }
    if (fused) convert = fused->convert;
    if (!convert && domain.empty()) {
      if (ConvertFn f = find_converter(node.op_type)) convert = f;
    }
    const std::int64_t node_opset = opsets.contains(domain) ? opsets[domain] : 0;
    if (!convert) {
      unsupported.push_back({label, node.op_type, domain, node_opset,
                             domain.empty() ? "no converter in teeny" : "no converter registered for this domain"});
      skip();
      continue;
    }
    NodeContext ctx(*state, node, state->unique_name(label), opset);
    Result<void> converted = convert(ctx);
    if (converted && ctx.attribute_error()) converted = *ctx.attribute_error();
    if (converted) {
      for (std::size_t i = 0; i < node.outputs.size(); ++i) {
        if (!node.outputs[i].empty() && !state->values.contains(node.outputs[i])) {
          converted = fail(Errc::unsupported, "output ", i, " '", node.outputs[i], "'");
          break;
        }
      }
    }
    if (!converted) {
      const Error& e = converted.error();
      if (e.code() == Errc::unsupported) {
        unsupported.push_back({label, node.op_type, domain, node_opset, e.message()});
      } else {
        add_error(e.code(), cat("node '", label, "' (", node.op_type, "): ", e.to_string()));
      }
      skip();
    }
  }

  for (const proto::ValueInfo& out : g.outputs) {
    if (unavailable.contains(out.name)) continue;
    const auto it = state->values.find(out.name);
    if (it == state->values.end()) {
      add_error(Errc::not_found, cat("graph output '", out.name, "' is not computed by any node"));
    } else if (it->second.shape != nullptr) {
      unsupported.push_back({out.name, "(graph output)", "", opset,
                             "a graph output known at import (a shape of symbolic dims): teeny's graph outputs are "
                             "tensors"});
    } else if (it->second.constant == nullptr && !it->second.value.valid()) {
      continue;  // the node that computes it failed in the builder, whose error build() reports
    } else {
      // A constant output (folded at import) is a Weight node holding it.
      auto v = constant_as_value(*state, out.name, it->second);
      if (!v && v.error().code() == Errc::unsupported) {
        unsupported.push_back({out.name, "(graph output)", "", opset, v.error().message()});
      } else if (!v) {
        add_error(v.error().code(), cat("graph output '", out.name, "': ", v.error().to_string()));
      } else {
        state->builder.output(out.name, *v);
        const TensorType* t = state->builder.type_of(*v);
        if (t != nullptr) outputs.push_back({out.name, t->dtype, t->shape});
      }
    }
  }

  if (!unsupported.empty()) {
    std::string message = cat(unsupported.size(), " node(s) of the model cannot be imported:");
    for (const Unsupported& u : unsupported) {
      message += cat("\n  node '", u.node, "' (", u.op_type, u.domain.empty() ? "" : cat(", domain '", u.domain, "'"),
                     ", opset ", u.opset, "): ", u.reason);
    }
    for (const std::string& e : errors) message += cat("\n  ", e);
    return fail(Errc::unsupported, message);
  }
  if (!errors.empty()) {
    std::string message = errors.front();
    for (std::size_t i = 1; i < errors.size(); ++i) message += cat("\n", errors[i]);
    return fail(errors_code, message);
  }
  auto graph = std::move(state->builder).build();
  if (!graph) return std::move(graph).error();
  std::string producer =
      parsed.producer_version.empty() ? parsed.producer_name : cat(parsed.producer_name, " ", parsed.producer_version);
  return ImportedModel{std::move(*graph),          std::move(state->weights), std::move(inputs), std::move(outputs),
                       std::move(imported_opsets), std::move(producer),       parsed.ir_version};
}

}  // namespace

Result<ParamSource> ImportedModel::params() const {
  std::vector<TensorRef> refs;
  refs.reserve(weights.size());
  for (const NamedTensor& w : weights) refs.push_back(TensorRef::of(w));
  return ParamSource::of(refs);
}

Result<ImportedModel> import_model(std::span<const std::byte> bytes, const ImportOptions& options) {
  if (bytes.size() > options.max_file_bytes) {
    return fail(Errc::out_of_range, "the model is ", bytes.size(), " bytes, over the limit of ",
                options.max_file_bytes);
  }
  proto::Model parsed;
  std::string error;
  if (!proto::parse_model(bytes, parsed, error)) return fail(Errc::parse, error);
  return import_parsed(parsed, ExternalData(), options);
}

Result<ImportedModel> import_model(const std::string& path, const ImportOptions& options) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > options.max_file_bytes) {
    return fail(Errc::out_of_range, "'", path, "' is ", size, " bytes, over the limit of ", options.max_file_bytes);
  }
  auto bytes = read_file(path);
  if (!bytes) return std::move(bytes).error();
  proto::Model parsed;
  std::string error;
  if (!proto::parse_model(*bytes, parsed, error)) return fail(Errc::parse, "'", path, "': ", error);
  auto model = import_parsed(parsed, ExternalData(std::filesystem::path(path).parent_path()), options);
  if (!model) return std::move(model).error().context(cat("'", path, "'"));
  return model;
}

Result<CpuModel> load_cpu(const std::string& path, const Bindings& dims, const ImportOptions& options, CpuOptions cpu) {
  auto imported = import_model(path, options);
  if (!imported) return std::move(imported).error();
  auto params = imported->params();
  if (!params) return std::move(params).error();
  auto model = teeny::load_cpu(imported->graph, dims, cpu, &*params);  // weights packed once
  if (!model) return std::move(model).error().context(cat("'", path, "'"));
  return model;
}

Result<NamedTensor> read_tensor_file(const std::string& path) {
  auto bytes = read_file(path);
  if (!bytes) return std::move(bytes).error();
  proto::Tensor t;
  std::string error;
  if (!proto::parse_tensor(*bytes, t, error)) return fail(Errc::parse, "'", path, "': ", error);
  ExternalData external(std::filesystem::path(path).parent_path());
  auto tensor = to_tensor(t, external);
  if (!tensor) return std::move(tensor).error().context(cat("'", path, "'"));
  return NamedTensor{t.name, std::move(*tensor)};
}

}  // namespace teeny::onnx
