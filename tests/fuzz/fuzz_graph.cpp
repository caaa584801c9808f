// Fuzzes graph building: the input is decoded into GraphBuilder calls (inputs of random shapes,
// with huge and symbolic dims, then ops with random attributes on random earlier values), then
// build() and the built graph's parameter and summary queries. Every bad shape or attribute must
// come back as an error value; shape inference must never overflow (UBSan) or crash.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Reader in(data, size);
  teeny::GraphBuilder b;
  std::vector<Value> values;
  auto pick = [&]() -> Value { return values.empty() ? Value{} : values[in.byte() % values.size()]; };

  const int inputs = 1 + in.byte() % 3;
  for (int i = 0; i < inputs; ++i) {
    values.push_back(b.input("x" + std::to_string(i), in.dtype(), teeny::Shape(in.dims(9))));
  }
  for (int step = 0; step < 48 && !in.done(); ++step) {
    Value x = pick();
    Value made;
    switch (in.byte() % 44) {
      case 0: made = b.linear(x, in.integer(), in.flag()); break;
      case 1: made = b.matmul(x, pick()); break;
      case 2:
        made = b.conv1d(x, in.integer(), in.integer(),
                        {.stride = in.integer(),
                         .padding = in.integer(),
                         .dilation = in.integer(),
                         .groups = in.integer(),
                         .bias = in.flag()});
        break;
      case 3:
        made = b.conv2d(x, in.integer(), in.size2(),
                        {.stride = in.size2(),
                         .padding = in.size2(),
                         .dilation = in.size2(),
                         .groups = in.integer(),
                         .bias = in.flag()});
        break;
      case 4: {
        teeny::Pool2dOptions o;
        if (in.flag()) o.stride = in.size2();
        o.padding = in.size2();
        o.dilation = in.size2();
        o.ceil_mode = in.flag();
        made = b.max_pool2d(x, in.size2(), o);
        break;
      }
      case 5: {
        teeny::AvgPool2dOptions o;
        if (in.flag()) o.stride = in.size2();
        o.padding = in.size2();
        o.ceil_mode = in.flag();
        o.count_include_pad = in.flag();
        o.divisor_override = in.maybe();
        made = b.avg_pool2d(x, in.size2(), o);
        break;
      }
      case 6: made = b.adaptive_avg_pool2d(x, in.size2()); break;
      case 7: made = b.batch_norm1d(x, {.eps = in.real(), .momentum = in.real(), .affine = in.flag()}); break;
      case 8:
        made = b.batch_norm2d(x, {.eps = in.real(), .affine = in.flag(), .track_running_stats = in.flag()});
        break;
      case 9: made = b.layer_norm(x, in.integers(4), {.eps = in.real(), .elementwise_affine = in.flag()}); break;
      case 10: made = b.rms_norm(x, in.integers(4), {.eps = in.real(), .elementwise_affine = in.flag()}); break;
      case 11: made = b.group_norm(x, in.integer(), {.eps = in.real(), .affine = in.flag()}); break;
      case 12:
        made = b.embedding(x, in.integer(), in.integer(), {.padding_idx = in.maybe(), .dtype = in.dtype()});
        break;
      case 13: made = b.dropout(x, in.real()); break;
      case 14: made = b.attention(x, pick(), pick(), {.causal = in.flag(), .scale = in.real()}); break;
      case 15: made = b.relu(x); break;
      case 16: made = b.leaky_relu(x, in.real()); break;
      case 17: made = b.gelu(x, in.flag() ? teeny::GeluApproximate::tanh : teeny::GeluApproximate::none); break;
      case 18: made = b.softplus(x, in.real(), in.real()); break;
      case 19: made = b.softmax(x, in.integer()); break;
      case 20: made = b.log_softmax(x, in.integer()); break;
      case 21: made = b.add(x, pick()); break;
      case 22: made = b.mul(x, pick()); break;
      case 23: made = b.pow(x, pick()); break;
      case 24: made = b.maximum(x, pick()); break;
      case 25: made = b.exp(x); break;
      case 26: made = b.sum(x, in.integers(4), in.flag()); break;
      case 27: made = b.mean(x, in.integers(4), in.flag()); break;
      case 28: made = b.max(x, in.integers(4), in.flag()); break;
      case 29: made = b.flatten(x, in.integer(), in.integer()); break;
      case 30: made = b.reshape(x, in.dims(9)); break;
      case 31: made = b.transpose(x, in.integer(), in.integer()); break;
      case 32: made = b.permute(x, in.integers(9)); break;
      case 33: {
        std::vector<Value> xs{x};
        for (int n = in.byte() % 4; n > 0; --n) xs.push_back(pick());
        made = b.concat(std::move(xs), in.integer());
        break;
      }
      case 34:
        for (Value v : b.split(x, in.integers(5), in.integer())) values.push_back(v);
        break;
      case 35:
        for (Value v : b.chunk(x, in.byte() % 9 == 8 ? in.integer() : in.byte() % 8, in.integer())) {
          values.push_back(v);
        }
        break;
      case 36: made = b.slice(x, in.integer(), in.maybe(), in.maybe(), in.integer()); break;
      case 37: {
        static constexpr teeny::PadMode modes[] = {teeny::PadMode::constant, teeny::PadMode::reflect,
                                                   teeny::PadMode::replicate};
        made = b.pad(x, in.integers(8), modes[in.byte() % 3], in.real());
        break;
      }
      case 38: made = b.upsample(x, in.real()); break;
      case 39: made = b.upsample(x, in.real(), in.real()); break;
      case 40: made = b.cast(x, in.dtype()); break;
      case 41: made = b.sub(x, pick()).named(in.flag() ? "x0" : "renamed"); break;
      case 42: made = b.sigmoid(b.tanh(b.silu(b.hardswish(b.elu(x, in.real()))))); break;
      case 43: b.output("out" + std::to_string(in.byte() % 4), x); break;
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
