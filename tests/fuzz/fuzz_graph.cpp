// Fuzzes graph building: the input is decoded into GraphBuilder calls (inputs of random shapes,
// with huge and symbolic dims, then ops with random attributes on random earlier values), then
// build() and the built graph's parameter and summary queries. Every bad shape or attribute must
// come back as an error value; shape inference must never overflow (UBSan) or crash.
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>
import teeny;

namespace {

using teeny::Dim;
using teeny::DType;
using teeny::Value;

// Reads the input front to back; past its end every read gives zero.
class Reader {
 public:
  Reader(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  bool done() const { return at_ >= size_; }
  std::uint8_t byte() { return at_ < size_ ? data_[at_++] : 0; }
  bool flag() { return (byte() & 1) != 0; }
  // Mostly small sizes, sometimes the edges that overflow arithmetic.
  std::int64_t integer() {
    static constexpr std::int64_t edges[] = {0,
                                             -1,
                                             -2,
                                             -3,
                                             std::int64_t{1} << 31,
                                             (std::int64_t{1} << 32) + 1,
                                             std::int64_t{1} << 40,
                                             (std::int64_t{1} << 56) + 1,
                                             std::int64_t{1} << 62,
                                             std::numeric_limits<std::int64_t>::max(),
                                             std::numeric_limits<std::int64_t>::min(),
                                             std::numeric_limits<std::int64_t>::min() + 1};
    const std::uint8_t b = byte();
    if (b < 200) return b % 34 - 1;  // -1 .. 32
    if (b < 200 + std::size(edges)) return edges[b - 200];
    std::int64_t v = 0;  // raw 8 bytes
    for (int i = 0; i < 8; ++i) v = static_cast<std::int64_t>((static_cast<std::uint64_t>(v) << 8) | byte());
    return v;
  }
  std::optional<std::int64_t> maybe() {
    if (flag()) return std::nullopt;
    return integer();
  }
  double real() {
    static constexpr double values[] = {0.0,
                                        0.5,
                                        1.0,
                                        2.0,
                                        3.0,
                                        -1.0,
                                        1e-5,
                                        0.25,
                                        1e30,
                                        -1e30,
                                        std::numeric_limits<double>::infinity(),
                                        std::numeric_limits<double>::quiet_NaN(),
                                        std::numeric_limits<double>::denorm_min(),
                                        1.5,
                                        1e300,
                                        4.0};
    return values[byte() % std::size(values)];
  }
  std::vector<std::int64_t> integers(std::size_t most) {
    std::vector<std::int64_t> out(byte() % (most + 1));
    for (auto& v : out) v = integer();
    return out;
  }
  teeny::Size2 size2() { return flag() ? teeny::Size2(integer()) : teeny::Size2{integer(), integer()}; }
  DType dtype() {
    static constexpr DType types[] = {DType::f32, DType::f32, DType::f32, DType::i64,    DType::f16,
                                      DType::f64, DType::i32, DType::u8,  DType::boolean};
    return types[byte() % std::size(types)];
  }
  Dim dim() {
    const std::uint8_t b = byte();
    if (b < 24) {
      static const char* const symbols[] = {"batch", "seq", "n"};
      return Dim::sym(symbols[b % 3], b < 12 ? 1 : integer());
    }
    return Dim(integer());
  }
  std::vector<Dim> dims(std::size_t most) {
    std::vector<Dim> out(byte() % (most + 1));
    for (auto& d : out) d = dim();
    return out;
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t at_ = 0;
};

// What a maker works with: the builder, the input, and the values made so far.
struct Step {
  teeny::GraphBuilder& b;
  Reader& in;
  std::vector<Value>& values;
  Value pick() { return values.empty() ? Value{} : values[in.byte() % values.size()]; }
};

// One maker per graph op: it makes that op on x (and values picked from the earlier ones) through
// the builder's call for it, with attributes from the input. Together they are the list the fuzzer
// picks from, indexed by GraphOp's alternatives, so an op added to GraphOp without a maker here
// does not compile (has_maker names it).
template <class Op>
using op_t = std::type_identity<Op>;
Value make(op_t<teeny::Input>, Step& s, Value) {
  return s.b.input("x" + std::to_string(s.values.size()), s.in.dtype(), teeny::Shape(s.in.dims(9)));
}
Value make(op_t<teeny::Weight>, Step& s, Value) {
  const bool trainable = s.in.flag();
  return s.b.weight(s.in.dtype(), s.in.integers(5), s.in.dims(5), trainable);
}
Value make(op_t<teeny::Cast>, Step& s, Value x) { return s.b.cast(x, s.in.dtype()); }
Value make(op_t<teeny::Flatten>, Step& s, Value x) { return s.b.flatten(x, s.in.integer(), s.in.integer()); }
Value make(op_t<teeny::Reshape>, Step& s, Value x) { return s.b.reshape(x, s.in.dims(9)); }
Value make(op_t<teeny::Transpose>, Step& s, Value x) { return s.b.transpose(x, s.in.integer(), s.in.integer()); }
Value make(op_t<teeny::Permute>, Step& s, Value x) { return s.b.permute(x, s.in.integers(9)); }
Value make(op_t<teeny::Concat>, Step& s, Value x) {
  std::vector<Value> xs{x};
  for (int n = s.in.byte() % 4; n > 0; --n) xs.push_back(s.pick());
  return s.b.concat(std::move(xs), s.in.integer());
}
Value make(op_t<teeny::Split>, Step& s, Value x) {  // split or chunk: every piece becomes a value
  const std::vector<Value> pieces =
      s.in.flag() ? s.b.split(x, s.in.integers(5), s.in.integer())
                  : s.b.chunk(x, s.in.byte() % 9 == 8 ? s.in.integer() : s.in.byte() % 8, s.in.integer());
  for (Value v : pieces) s.values.push_back(v);
  return {};
}
Value make(op_t<teeny::Slice>, Step& s, Value x) {
  return s.b.slice(x, s.in.integer(), s.in.maybe(), s.in.maybe(), s.in.integer());
}
Value make(op_t<teeny::Pad>, Step& s, Value x) {
  return s.b.pad(x, s.in.integers(8), static_cast<teeny::PadMode>(s.in.byte() % teeny::pad_mode_count), s.in.real());
}
Value make(op_t<teeny::Upsample>, Step& s, Value x) {
  return s.in.flag() ? s.b.upsample(x, s.in.real()) : s.b.upsample(x, s.in.real(), s.in.real());
}
Value make(op_t<teeny::Linear>, Step& s, Value x) { return s.b.linear(x, s.in.integer(), s.in.flag()); }
Value make(op_t<teeny::MatMul>, Step& s, Value x) { return s.b.matmul(x, s.pick()); }
Value make(op_t<teeny::Conv1d>, Step& s, Value x) {
  Reader& in = s.in;
  return s.b.conv1d(x, in.integer(), in.integer(),
                    {.stride = in.integer(),
                     .padding = in.integer(),
                     .dilation = in.integer(),
                     .groups = in.integer(),
                     .bias = in.flag()});
}
Value make(op_t<teeny::Conv2d>, Step& s, Value x) {
  Reader& in = s.in;
  return s.b.conv2d(
      x, in.integer(), in.size2(),
      {.stride = in.size2(), .padding = in.size2(), .dilation = in.size2(), .groups = in.integer(), .bias = in.flag()});
}
Value make(op_t<teeny::MaxPool2d>, Step& s, Value x) {
  teeny::Pool2dOptions o;
  if (s.in.flag()) o.stride = s.in.size2();
  o.padding = s.in.size2();
  o.dilation = s.in.size2();
  o.ceil_mode = s.in.flag();
  return s.b.max_pool2d(x, s.in.size2(), o);
}
Value make(op_t<teeny::AvgPool2d>, Step& s, Value x) {
  teeny::AvgPool2dOptions o;
  if (s.in.flag()) o.stride = s.in.size2();
  o.padding = s.in.size2();
  o.ceil_mode = s.in.flag();
  o.count_include_pad = s.in.flag();
  o.divisor_override = s.in.maybe();
  return s.b.avg_pool2d(x, s.in.size2(), o);
}
Value make(op_t<teeny::AdaptiveAvgPool2d>, Step& s, Value x) { return s.b.adaptive_avg_pool2d(x, s.in.size2()); }
Value make(op_t<teeny::BatchNorm>, Step& s, Value x) {
  Reader& in = s.in;
  return in.flag() ? s.b.batch_norm1d(x, {.eps = in.real(), .momentum = in.real(), .affine = in.flag()})
                   : s.b.batch_norm2d(x, {.eps = in.real(), .affine = in.flag(), .track_running_stats = in.flag()});
}
Value make(op_t<teeny::LayerNorm>, Step& s, Value x) {
  return s.b.layer_norm(x, s.in.integers(4), {.eps = s.in.real(), .elementwise_affine = s.in.flag()});
}
Value make(op_t<teeny::RMSNorm>, Step& s, Value x) {
  return s.b.rms_norm(x, s.in.integers(4), {.eps = s.in.real(), .elementwise_affine = s.in.flag()});
}
Value make(op_t<teeny::GroupNorm>, Step& s, Value x) {
  return s.b.group_norm(x, s.in.integer(), {.eps = s.in.real(), .affine = s.in.flag()});
}
Value make(op_t<teeny::Embedding>, Step& s, Value x) {
  return s.b.embedding(x, s.in.integer(), s.in.integer(), {.padding_idx = s.in.maybe(), .dtype = s.in.dtype()});
}
Value make(op_t<teeny::Dropout>, Step& s, Value x) { return s.b.dropout(x, s.in.real()); }
Value make(op_t<teeny::Attention>, Step& s, Value x) {
  return s.b.attention(x, s.pick(), s.pick(), {.causal = s.in.flag(), .scale = s.in.real()});
}
Value make(op_t<teeny::ReLU>, Step& s, Value x) { return s.b.relu(x); }
Value make(op_t<teeny::LeakyReLU>, Step& s, Value x) { return s.b.leaky_relu(x, s.in.real()); }
Value make(op_t<teeny::GELU>, Step& s, Value x) {
  return s.b.gelu(x, s.in.flag() ? teeny::GeluApproximate::tanh : teeny::GeluApproximate::none);
}
Value make(op_t<teeny::SiLU>, Step& s, Value x) { return s.b.silu(x); }
Value make(op_t<teeny::Sigmoid>, Step& s, Value x) { return s.b.sigmoid(x); }
Value make(op_t<teeny::Tanh>, Step& s, Value x) { return s.b.tanh(x); }
Value make(op_t<teeny::Softplus>, Step& s, Value x) { return s.b.softplus(x, s.in.real(), s.in.real()); }
Value make(op_t<teeny::ELU>, Step& s, Value x) { return s.b.elu(x, s.in.real()); }
Value make(op_t<teeny::Hardswish>, Step& s, Value x) { return s.b.hardswish(x); }
Value make(op_t<teeny::Hardsigmoid>, Step& s, Value x) { return s.b.hardsigmoid(x); }
Value make(op_t<teeny::Threshold>, Step& s, Value x) { return s.b.threshold(x, s.in.real(), s.in.real()); }
Value make(op_t<teeny::Hardshrink>, Step& s, Value x) { return s.b.hardshrink(x, s.in.real()); }
Value make(op_t<teeny::Softshrink>, Step& s, Value x) { return s.b.softshrink(x, s.in.real()); }
Value make(op_t<teeny::Softmax>, Step& s, Value x) { return s.b.softmax(x, s.in.integer()); }
Value make(op_t<teeny::LogSoftmax>, Step& s, Value x) { return s.b.log_softmax(x, s.in.integer()); }
Value make(op_t<teeny::Binary>, Step& s, Value x) {
  switch (s.in.byte() % 5) {
    case 0: return s.b.add(x, s.pick());
    case 1: return s.b.mul(x, s.pick());
    case 2: return s.b.pow(x, s.pick());
    case 3: return s.b.maximum(x, s.pick());
    default: return s.b.sub(x, s.pick()).named(s.in.flag() ? "x0" : "renamed");  // names may clash
  }
}
Value make(op_t<teeny::Unary>, Step& s, Value x) { return s.b.exp(x); }
Value make(op_t<teeny::Reduce>, Step& s, Value x) {
  switch (s.in.byte() % 4) {
    case 0: return s.b.sum(x, s.in.integers(4), s.in.flag());
    case 1: return s.b.mean(x, s.in.integers(4), s.in.flag());
    case 2: return s.b.prod(x, s.in.integers(4), s.in.flag());
    default: return s.b.max(x, s.in.integers(4), s.in.flag());
  }
}
Value make(op_t<teeny::Compare>, Step& s, Value x) {
  return s.b.compare(x, static_cast<teeny::CompareOp>(s.in.byte() % (teeny::compare_op_count + 1)), s.pick());
}
Value make(op_t<teeny::Where>, Step& s, Value x) { return s.b.where(x, s.pick(), s.pick()); }
Value make(op_t<teeny::CumSum>, Step& s, Value x) {
  const bool exclusive = s.in.flag();
  return s.b.cumsum(x, s.in.integer(), exclusive, s.in.flag());
}
Value make(op_t<teeny::Hardmax>, Step& s, Value x) { return s.b.hardmax(x, s.in.integer()); }
Value make(op_t<teeny::ArgReduce>, Step& s, Value x) {
  const bool keepdim = s.in.flag();
  const bool last = s.in.flag();
  return s.in.flag() ? s.b.argmin(x, s.in.integer(), keepdim, last) : s.b.argmax(x, s.in.integer(), keepdim, last);
}
Value make(op_t<teeny::NllLoss>, Step& s, Value x) {
  const auto reduction = static_cast<teeny::LossReduction>(s.in.byte() % (teeny::loss_reduction_count + 1));
  std::optional<Value> weight;
  if (s.in.flag()) weight = s.pick();
  return s.b.nll_loss(x, s.pick(), weight, reduction, s.in.maybe());
}

template <class Op>
concept has_maker = requires(Step& s, Value x) {
  { make(op_t<Op>{}, s, x) } -> std::same_as<Value>;
};
// User ops (CustomOp) are the consumer project's to test; every other alternative needs a maker.
template <class Op>
Value make_alternative(Step& s, Value x) {
  if constexpr (std::same_as<Op, teeny::CustomOp>) {
    return {};
  } else if constexpr (!has_maker<Op>) {
    static_assert(has_maker<Op>, "every graph op needs a maker in tests/fuzz/fuzz_graph.cpp");
    return {};
  } else {
    return make(op_t<Op>{}, s, x);
  }
}
template <std::size_t... I>
Value make_nth(std::size_t n, Step& s, Value x, std::index_sequence<I...>) {
  Value made;
  (void)((n == I && (made = make_alternative<std::variant_alternative_t<I, teeny::GraphOp>>(s, x), true)) || ...);
  return made;
}
constexpr std::size_t graph_op_count = std::variant_size_v<teeny::GraphOp>;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Reader in(data, size);
  teeny::GraphBuilder b;
  std::vector<Value> values;
  Step step{b, in, values};

  const int inputs = 1 + in.byte() % 3;
  for (int i = 0; i < inputs; ++i) {
    values.push_back(b.input("x" + std::to_string(i), in.dtype(), teeny::Shape(in.dims(9))));
  }
  for (int n = 0; n < 48 && !in.done(); ++n) {
    Value x = step.pick();
    Value made;
    // One choice past the ops: an output, named out0..out3 (names may repeat).
    const std::size_t choice = in.byte() % (graph_op_count + 1);
    if (choice == graph_op_count) {
      b.output("out" + std::to_string(in.byte() % 4), x);
    } else {
      made = make_nth(choice, step, x, std::make_index_sequence<graph_op_count>{});
    }
    if (made.valid()) values.push_back(made);
  }
  if (!values.empty()) b.output("y", values.back());

  auto graph = std::move(b).build();
  if (!graph) {
    // Every failure is an error value with a message.
    if (graph.error().message().empty()) __builtin_trap();
    return 0;
  }
  (void)graph->parameters();
  (void)graph->parameter_count();
  (void)graph->buffer_count();
  (void)graph->summary();
  return 0;
}
