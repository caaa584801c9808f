// GraphBuilder: naming, default names, sizes read off inputs, multi-output ops, outputs, and
// sticky errors reported all at once by build().
#include <doctest/doctest.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

import teeny.graph;

#include "graph/support.hpp"

using namespace graph_test;

namespace {
std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = text.find('\n', start);
    out.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}
}  // namespace

TEST_CASE("builder: an MLP named like PyTorch modules, default names for the rest") {
  GraphBuilder b;
  const Value x = b.input("x", DType::f32, {batch, 784});
  Value h = b.relu(b.linear(x, 512).named("fc1"));
  h = b.relu(b.linear(h, 512).named("fc2"));
  const Value y = b.linear(h, 10).named("fc3");
  b.output("logits", y);

  CHECK(b.ok());
  CHECK(x.valid());
  CHECK(y.name() == "fc3");
  CHECK(h.name() == "relu_1");
  REQUIRE(y.type() != nullptr);
  CHECK(*y.type() == f32({batch, 10}));
  CHECK(*b.type_of(h) == f32({batch, 512}));

  auto g = std::move(b).build();
  REQUIRE(g);
  REQUIRE(g->size() == 6);
  const std::vector<std::string> names{"x", "fc1", "relu_0", "fc2", "relu_1", "fc3"};
  for (NodeId id = 0; id < g->size(); ++id) CHECK(g->name(id) == names[id]);
  CHECK(y.id() == 5);
  const auto& fc1 = std::get<Linear>(g->op(1));
  CHECK(fc1 == Linear{784, 512, true});  // in_features read off x
}

TEST_CASE("builder: default names count per op name and skip names in use") {
  GraphBuilder b;
  const Value x = b.input("x", DType::f32, {4});
  const Value a = b.add(x, x);
  const Value c = b.add(a, x);
  const Value m = b.mul(c, x);
  const Value s = b.sigmoid(x).named("relu_1");
  const Value r0 = b.relu(m);
  const Value r1 = b.relu(s);  // relu_1 is taken: relu_2
  const Value bn = b.batch_norm1d(b.input("feat", DType::f32, {2, 4}));
  CHECK(a.name() == "add_0");
  CHECK(c.name() == "add_1");
  CHECK(m.name() == "mul_0");
  CHECK(r0.name() == "relu_0");
  CHECK(r1.name() == "relu_2");
  CHECK(bn.name() == "batch_norm1d_0");
  b.output("y", r1);
  auto g = std::move(b).build();
  REQUIRE(g);
  CHECK(g->find("relu_1") == s.id());
  CHECK_FALSE(g->find("sigmoid_0").has_value());
  CHECK(g->operands(c.id()).size() == 2);
  CHECK(g->operands(a.id())[0] == x.id());
  CHECK(g->operands(a.id())[1] == x.id());  // x + x: two slots, one producer
}

TEST_CASE("builder: errors are sticky, skipped downstream, and reported together by build()") {
  GraphBuilder b;
  const Value x = b.input("x", DType::f32, {batch, 784});
  const Value bad = b.add(Linear{512, 10}, {x}).named("fc2");  // named after failing: still reported as fc2
  CHECK_FALSE(bad.valid());
  CHECK(bad.type() == nullptr);
  const Value skipped = b.softmax(b.relu(bad));  // skipped silently: bad's error is the cause
  CHECK_FALSE(skipped.valid());
  b.output("y", skipped);
  const Value ids = b.input("ids", DType::i64, {batch, 8});
  CHECK_FALSE(b.relu(ids).valid());
  CHECK_FALSE(b.add(b.input("a", DType::f32, {2, 3}), b.input("c", DType::f32, {4, 3})).valid());
  CHECK_FALSE(b.ok());

  auto g = std::move(b).build();
  REQUIRE_FALSE(g);
  CHECK(g.error().code() == Errc::shape_mismatch);
  const auto messages = lines(g.error().message());
  REQUIRE(messages.size() == 3);
  CHECK(messages[0] == "node 'fc2' (linear): input f32[batch, 784] has 784 features but in_features is 512");
  CHECK(messages[1] ==
        "node 'relu_0' (relu): input i64[batch, 8] is i64, but this op needs a floating-point dtype (f16, bf16, f32 "
        "or f64)");
  CHECK(messages[2] == "node 'add_0' (add): shapes [2, 3] and [4, 3] do not broadcast: dim 0 is 2 vs 4");
}

TEST_CASE("builder: duplicate names") {
  GraphBuilder b;
  const Value x = b.input("x", DType::f32, {3});
  const Value act = b.relu(x).named("act");
  const Value sig = b.sigmoid(x).named("act");
  CHECK(sig.valid());  // the node exists; the rename failed
  CHECK(sig.name() == "sigmoid_0");
  CHECK_FALSE(b.add(ReLU{}, {x}, "x").valid());
  CHECK_FALSE(b.input("x", DType::f32, {3}).valid());
  b.output("y", act);
  auto g = std::move(b).build();
  REQUIRE_FALSE(g);
  CHECK(g.error().code() == Errc::duplicate);
  const auto messages = lines(g.error().message());
  REQUIRE(messages.size() == 3);
  CHECK(messages[0] ==
        "node 'sigmoid_0' (sigmoid): cannot rename to 'act': the name is already used by node #1 (relu)");
  CHECK(messages[1] == "node 'x' (relu): name 'x' is already used by node #0 (input)");
  CHECK(messages[2] == "node 'x' (input): name 'x' is already used by node #0 (input)");
}

TEST_CASE("builder: renaming frees the old name") {
  GraphBuilder b;
  const Value x = b.input("x", DType::f32, {3});
  const Value r = b.relu(x).named("a").named("b");
  const Value s = b.relu(x).named("a");
  b.output("r", r);
  b.output("s", s);
  auto g = std::move(b).build();
  REQUIRE(g);
  CHECK(g->find("b") == r.id());
  CHECK(g->find("a") == s.id());
}

TEST_CASE("builder: values that are not from this builder are errors") {
  GraphBuilder other;
  const Value foreign = other.input("o", DType::f32, {1});
  GraphBuilder b;
  const Value x = b.input("x", DType::f32, {1});
  CHECK_FALSE(b.relu(Value{}).valid());
  CHECK_FALSE(b.add(x, foreign).valid());
  b.output("y", Value{});
  auto g = std::move(b).build();
  REQUIRE_FALSE(g);
  CHECK(g.error().code() == Errc::invalid_argument);
  const auto messages = lines(g.error().message());
  REQUIRE(messages.size() == 3);
  CHECK(messages[0] ==
        "node 'relu_0' (relu): input 0 is not a value of this builder (default-constructed, or from "
        "another GraphBuilder)");
  CHECK(messages[1] ==
        "node 'add_0' (add): input 1 is not a value of this builder (default-constructed, or from "
        "another GraphBuilder)");
  CHECK(messages[2] ==
        "output 'y': the value is not from this builder (default-constructed, or from another "
        "GraphBuilder)");
}

TEST_CASE("builder: outputs are named, unique, and at least one") {
  {
    GraphBuilder b;
    b.relu(b.input("x", DType::f32, {1}));
    auto g = std::move(b).build();
    REQUIRE_FALSE(g);
    CHECK(g.error().message() == "a graph needs at least one output: call output(name, value)");
  }
  {
    GraphBuilder b;
    const Value x = b.input("x", DType::f32, {1});
    const Value r = b.relu(x);
    b.output("y", r);
    b.output("y", x);
    b.output("z", "nope");
    auto g = std::move(b).build();
    REQUIRE_FALSE(g);
    CHECK(g.error().code() == Errc::duplicate);
    const auto messages = lines(g.error().message());
    REQUIRE(messages.size() == 2);
    CHECK(messages[0] == "output 'y' is declared twice (nodes 'relu_0' and 'x')");
    CHECK(messages[1] == "output 'z': there is no node named 'nope'");
  }
  {
    GraphBuilder b;
    const Value x = b.input("x", DType::f32, {1});
    b.output("hidden", b.relu(x).named("act"));
    b.output("input_again", "x");
    auto g = std::move(b).build();
    REQUIRE(g);
    REQUIRE(g->outputs().size() == 2);
    CHECK(g->outputs()[0] == NamedOutput{"hidden", 1});
    CHECK(g->outputs()[1] == NamedOutput{"input_again", 0});
    CHECK(g->output("hidden") == NodeId{1});
    CHECK_FALSE(g->output("nope").has_value());
  }
}

TEST_CASE("builder: chunk and split make one node per piece") {
  GraphBuilder b;
  const Value x = b.input("x", DType::f32, {2, 10});
  const auto parts = b.chunk(x, 3, 1);  // ceil(10 / 3) = 4: 4, 4, 2
  REQUIRE(parts.size() == 3);
  CHECK(*parts[0].type() == f32({2, 4}));
  CHECK(*parts[1].type() == f32({2, 4}));
  CHECK(*parts[2].type() == f32({2, 2}));
  CHECK(parts[0].name() == "split_0");
  CHECK(parts[2].name() == "split_2");

  const auto five = b.chunk(b.input("v", DType::f32, {5}), 4);  // ceil(5 / 4) = 2: 2, 2, 1 (only 3 pieces)
  REQUIRE(five.size() == 3);
  CHECK(*five[2].type() == f32({1}));
  const auto empty = b.chunk(b.input("e", DType::f32, {2, 0}), 3, 1);
  REQUIRE(empty.size() == 3);
  CHECK(*empty[1].type() == f32({2, 0}));

  const Value qkv = b.input("qkv", DType::f32, {batch, 16, 192});
  const auto heads = b.split(qkv, {64, 64, 64}, -1);
  REQUIRE(heads.size() == 3);
  const Value q = heads[0].named("q");
  CHECK(q.name() == "q");
  CHECK(*heads[2].type() == f32({batch, 16, 64}));
  const Value att = b.attention(q, heads[1], heads[2], {.causal = true});
  CHECK(*att.type() == f32({batch, 16, 64}));

  const auto bad = b.split(x, {3, 3}, 1);  // one error, both pieces invalid
  REQUIRE(bad.size() == 2);
  CHECK_FALSE(bad[0].valid());
  CHECK_FALSE(bad[1].valid());
  const auto symbolic = b.chunk(qkv, 2, 0);
  REQUIRE(symbolic.size() == 2);
  CHECK_FALSE(symbolic[0].valid());
  b.output("y", att);
  auto g = std::move(b).build();
  REQUIRE_FALSE(g);
  const auto messages = lines(g.error().message());
  REQUIRE(messages.size() == 2);
  CHECK_CONTAINS(messages[0], "(split): split sizes [3, 3] sum to 6, but dim 1 of input f32[2, 10] is 10");
  CHECK(messages[1] ==
        "node 'chunk_0' (chunk): cannot chunk dim 0 of input f32[batch, 16, 192]: its size 'batch' "
        "is symbolic");
}

TEST_CASE("builder: sizes read off the input, as PyTorch's modules take them") {
  GraphBuilder b;
  const Value x = b.input("x", DType::f32, {batch, 3, 32, 32});
  const Value c = b.conv2d(x, 16, 3, {.padding = 1});
  const Value n = b.batch_norm2d(c);
  const Value gn = b.group_norm(n, 4);
  const Value c1 = b.conv1d(b.input("seq", DType::f32, {batch, 8, 100}), 4, 5);
  const Value emb = b.embedding(b.input("ids", DType::i64, {batch, 7}), 100, 32, {.padding_idx = 0});
  const Value ln = b.layer_norm(emb, {32});
  CHECK(*gn.type() == f32({batch, 16, 32, 32}));
  CHECK(*c1.type() == f32({batch, 4, 96}));
  CHECK(*ln.type() == f32({batch, 7, 32}));

  const Value wide = b.input("wide", DType::f32, {batch, Dim::sym("n")});
  CHECK_FALSE(b.linear(wide, 10).valid());
  CHECK_FALSE(b.conv2d(b.input("flat", DType::f32, {3, 32}), 16, 3).valid());  // the op reports the rank
  b.output("y", gn);
  b.output("z", ln);
  auto g = std::move(b).build();
  REQUIRE_FALSE(g);
  const auto messages = lines(g.error().message());
  REQUIRE(messages.size() == 2);
  CHECK(messages[0] ==
        "node 'linear_0' (linear): linear reads in_features from dim 1 of its input f32[batch, n], "
        "which is symbolic ('n')");
  CHECK(messages[1] == "node 'conv2d_1' (conv2d): expects a [N, C, H, W] or [C, H, W] input, got f32[3, 32]");
}

TEST_CASE("builder: the generic add takes any op; Input nodes become graph inputs in order") {
  GraphBuilder b;
  const Value a = b.add(Input{f32({batch, 4})}, {}, "a");
  const Value c = b.input("c", DType::f32, {4});
  const Value s = b.add(Binary{BinaryOp::sub}, {a, c}, "diff");
  const Value cat = b.concat({s, s}, -1);
  const Value p = b.pad(b.upsample(b.input("img", DType::f32, {1, 3, 4, 4}), 2), {1, 1, 1, 1});
  b.output("cat", cat);
  b.output("img", p);
  CHECK(*cat.type() == f32({batch, 8}));
  CHECK(*p.type() == f32({1, 3, 10, 10}));
  CHECK(cat.name() == "concat_0");
  auto g = std::move(b).build();
  REQUIRE(g);
  REQUIRE(g->inputs().size() == 3);
  CHECK(g->name(g->inputs()[0]) == "a");
  CHECK(g->name(g->inputs()[1]) == "c");
  CHECK(g->name(g->inputs()[2]) == "img");
  CHECK(kind(g->op(s.id())) == "sub");
  CHECK(g->type(s.id()) == f32({batch, 4}));
}

TEST_CASE("builder: a small convnet end to end") {
  GraphBuilder b;
  Value x = b.input("image", DType::f32, {batch, 1, 28, 28});
  x = b.relu(b.conv2d(x, 32, 5, {.padding = 2}).named("conv1"));
  x = b.max_pool2d(x, 2);
  CHECK(*x.type() == f32({batch, 32, 14, 14}));
  x = b.relu(b.batch_norm2d(b.conv2d(x, 64, 5, {.padding = 2}).named("conv2")).named("bn2"));
  x = b.max_pool2d(x, 2, {.stride = 2});
  x = b.flatten(x);
  CHECK(*x.type() == f32({batch, 3136}));
  x = b.linear(b.dropout(x, 0.25), 10).named("fc");
  b.output("log_probs", b.log_softmax(x, 1));
  auto g = std::move(b).build();
  REQUIRE(g);
  std::vector<std::string> keys;
  for (const ParamInfo& p : g->parameters()) keys.push_back(p.key);
  CHECK(keys == std::vector<std::string>{"conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias", "bn2.weight",
                                         "bn2.bias", "bn2.running_mean", "bn2.running_var", "bn2.num_batches_tracked",
                                         "fc.weight", "fc.bias"});
  CHECK(g->parameters()[2].shape == Shape{64, 32, 5, 5});
  CHECK(g->parameters()[9].shape == Shape{10, 3136});
  // 32*25 + 32 + 64*32*25 + 64 + 2*64 + 10*3136 + 10
  CHECK(g->parameter_count() == 832 + 51264 + 128 + 31370);
}

TEST_CASE("builder: values outlive build() only as ids") {
  GraphBuilder b;
  const Value x = b.input("x", DType::f32, {2});
  b.output("y", x);
  auto g = std::move(b).build();
  REQUIRE(g);
  CHECK(g->name(x.id()) == "x");
  CHECK(x.name().empty());
  CHECK(x.type() == nullptr);
  CHECK(x.named("z").name().empty());  // a no-op
  CHECK_FALSE(b.relu(x).valid());      // NOLINT(bugprone-use-after-move): build() leaves b empty
  CHECK_FALSE(b.ok());
}

// Found by tests/fuzz/fuzz_graph (with UBSan): sizes and attributes near int64's limits overflowed
// in shape inference. Each is now an error naming the node and the shapes, and every type and
// parameter a graph holds stays within 2^56 elements.
TEST_CASE("builder: huge sizes and attributes are errors, never overflow") {
  constexpr std::int64_t max = INT64_MAX;
  constexpr std::int64_t t40 = std::int64_t{1} << 40;
  GraphBuilder b;
  const Value img = b.input("img", DType::f32, {1, 1, 8, 8});
  b.conv2d(img, 1, 3, {.padding = max}).named("conv");
  b.max_pool2d(img, {max, 3}, {.dilation = Size2{2, 1}}).named("pool");
  b.upsample(img, 1e300).named("up");
  b.upsample(b.input("sym", DType::f32, {1, 1, batch, 2}), 0x1p60).named("up_sym");
  const Value v = b.input("v", DType::f32, {4});
  b.split(v, {max, 1})[0].named("split");
  b.pad(v, {max, 1}).named("pad");
  b.reshape(v, {t40, t40, -1}).named("reshape");
  b.chunk(v, max)[0].named("chunk");
  b.input("too_many", DType::f32, {t40, t40});
  b.input("too_many_with_zero", DType::f32, {t40, t40, 0});
  b.concat({b.input("c", DType::f32, {std::int64_t{1} << 56}), v}).named("cat");
  b.add(b.input("col", DType::f32, {t40, 1}), b.input("row", DType::f32, {1, t40})).named("outer");
  b.linear(b.input("wide", DType::f32, {2, t40}), t40).named("fc");
  b.embedding(b.input("ids", DType::i64, {1, 1, 1, 1, 1, 1, 1, 1}), 4, 2).named("emb");
  CHECK(*b.max_pool2d(img, 3, {.stride = max, .padding = 1, .ceil_mode = true}).type() == f32({1, 1, 1, 1}));
  // A step past the end keeps one element (PyTorch's x[0::step]), without overflow.
  const Value one = b.slice(v, 0, 0, std::nullopt, max);
  REQUIRE(one.valid());
  CHECK(*one.type() == f32({1}));
  b.output("y", one);

  auto g = std::move(b).build();
  REQUIRE_FALSE(g);
  CHECK(g.error().code() == Errc::out_of_range);
  const auto messages = lines(g.error().message());
  // Each line holds these parts (a double's digits are left out).
  const std::vector<std::vector<std::string>> expected = {
      {"node 'conv' (conv2d): the window on dim 2 of input f32[1, 1, 8, 8] (kernel 3, stride 1, padding "
       "9223372036854775807, dilation 1) is too large: its size overflows"},
      {"node 'pool' (max_pool2d): the window on dim 2 of input f32[1, 1, 8, 8] (kernel 9223372036854775807, stride "
       "9223372036854775807, padding 0, dilation 2) is too large: its size overflows"},
      {"node 'up' (upsample): scale ", " makes dim 2 of input f32[1, 1, 8, 8] too large"},
      {"node 'up_sym' (upsample): scale ", " makes dim 2 of input f32[1, 1, batch, 2] too large"},
      {"node 'split' (split): split sizes [9223372036854775807, 1] overflow when summed"},
      {"node 'pad' (pad): padding (9223372036854775807, 1) of dim 0 of input f32[4] overflows"},
      {"node 'reshape' (reshape): target shape [1099511627776, 1099511627776, -1] has more elements than fit in "
       "int64"},
      {"node 'chunk' (chunk): chunks 9223372036854775807 is more than the 65536 pieces (nodes) one chunk may make"},
      {"node 'too_many' (input): the output f32[1099511627776, 1099511627776] is too large: more than 8 dims, a "
       "negative size, or more than 2^56 elements"},
      {"node 'too_many_with_zero' (input): the output f32[1099511627776, 1099511627776, 0] is too large"},
      {"node 'cat' (concat): the output f32[72057594037927940] is too large"},
      {"node 'outer' (add): the output f32[1099511627776, 1099511627776] is too large"},
      {"node 'fc' (linear): parameter 'weight' f32[1099511627776, 1099511627776] is too large"},
      {"node 'emb' (embedding): the output f32[1, 1, 1, 1, 1, 1, 1, 1, 2] is too large: more than 8 dims"},
  };
  REQUIRE(messages.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    for (const std::string& part : expected[i]) CHECK_CONTAINS(messages[i], part);
  }
}
