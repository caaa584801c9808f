// teeny.fixed — the compile-time-typed model: values whose types carry element type and shape,
// layers declared as in PyTorch and named by their state_dict paths, shapes inferred and checked
// by the compiler, and what a model needs (its nodes, their uses, its parameters and where they
// go) computed as constants.
//
//   import teeny.fixed;
//   namespace tf = teeny::fixed;
//   constexpr tf::Linear<"fc1", 784, 512> fc1;
//   constexpr tf::Linear<"fc2", 512, 10> fc2;
//   auto x = tf::input<"x", float, 64, 1, 28, 28>();
//   auto y = fc2(tf::relu(fc1(tf::flatten(x))));     // Dims<64, 10>
//   using mlp = tf::Network<decltype(y)>;             // mlp::params: fc1.weight [512, 784], ...
//   fc2(fc2(y));   // does not compile: 'fc2' expects Dims<64, 512>, got Dims<64, 10>
//
// Its names (Linear, ReLU, Value, ...) are teeny::fixed's own, apart from the run-time graph's:
// use them qualified or through a namespace alias.
//
// Partitions: name (Name, compile-time strings), value (Dims, Node, Value, input), layers (the
// layers and their shape checks), custom (ops defined outside teeny as layers), network
// (topological order, uses, parameters), plan (the lowering's folds and the constexpr memory
// plan), model (Model: the plan's steps as a tuple of executable ops with CPU kernels). Weights
// from files: teeny.fixed.io (read_weights).
export module teeny.fixed;
import teeny.std;
export import :name;
export import :value;
export import :layers;
export import :custom;
export import :network;
export import :plan;
export import :model;
