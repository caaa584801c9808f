// LoadedModel's device path, checked on the CPU: a backend that owns its memory
// (DeviceMemoryBackend), prepares each launch told its node and geometry (LaunchSite), captures
// and replays graphs (GraphBackend) and reports failed launches (ReportsRunErrors) — what the CUDA
// backend does on a GPU. Here that backend is `HostDevice`: "device memory" it hands out and
// checks every copy against, the CPU's kernels, and a capture that records launches without
// running them, as CUDA's does. The MLP and LeNet run through it against PyTorch and against the
// same model on the plain CPU backend.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

import teeny;

#include "models.hpp"
#include "support/fixtures.hpp"

namespace fake {

struct DeviceMemory {
  std::unique_ptr<std::byte[]> bytes;
  void* data() { return bytes.get(); }
};

struct Site {
  std::string node;
  std::size_t launch;
  teeny::Dim3 grid;
  teeny::Dim3 block;
};

// `Trains`: it also zeroes its memory and runs backward kernels (a DeviceTrainingBackend).
template <bool Trains>
class HostDeviceOf {
 public:
  explicit HostDeviceOf(teeny::CpuContext cpu) : cpu(std::move(cpu)) {}

  using Memory = DeviceMemory;
  teeny::Result<DeviceMemory> allocate(std::size_t bytes) {
    DeviceMemory memory{std::make_unique<std::byte[]>(bytes == 0 ? 1 : bytes)};
    ranges_.push_back({memory.bytes.get(), bytes});
    return memory;
  }
  teeny::Result<void> upload(void* to, const void* from, std::size_t bytes) {
    REQUIRE(on_device(to, bytes));
    REQUIRE_FALSE(on_device(from, bytes));
    if (fail_uploads) return teeny::fail(teeny::Errc::device, "the device refused the copy");
    std::memcpy(to, from, bytes);
    ++uploads;
    uploaded_bytes += bytes;
    return teeny::ok();
  }
  teeny::Result<void> download(void* to, const void* from, std::size_t bytes) {
    REQUIRE(on_device(from, bytes));
    REQUIRE_FALSE(on_device(to, bytes));
    std::memcpy(to, from, bytes);
    ++downloads;
    return teeny::ok();
  }

  teeny::Result<void> copy_on_device(void* to, const void* from, std::size_t bytes) {
    REQUIRE(on_device(to, bytes));
    REQUIRE(on_device(from, bytes));
    std::memcpy(to, from, bytes);
    ++device_copies;
    return teeny::ok();
  }

  teeny::Result<void> zero(void* to, std::size_t bytes)
    requires Trains
  {
    REQUIRE(on_device(to, bytes));
    ++zeroed;
    if (capturing) {
      recorded.push_back([to, bytes] { std::memset(to, 0, bytes); });  // a memset node of the graph
      return teeny::ok();
    }
    std::memset(to, 0, bytes);
    return teeny::ok();
  }
  void set_phase(const teeny::RunPhase& phase) { cpu.set_phase(phase); }

  using Graph = std::vector<std::function<void()>>;
  teeny::Result<void> begin_capture() {
    REQUIRE_FALSE(capturing);
    capturing = true;
    return teeny::ok();
  }
  teeny::Result<Graph> end_capture() {
    REQUIRE(capturing);
    capturing = false;
    ++captures;
    return std::exchange(recorded, {});
  }
  teeny::Result<void> replay(Graph& graph) {
    for (auto& launch : graph) launch();
    ++replays;
    return teeny::ok();
  }

  teeny::Result<void> take_error() {
    if (!error) return teeny::ok();
    return std::exchange(error, std::nullopt).value();
  }

  bool on_device(const void* p, std::size_t bytes) const {
    const auto* b = static_cast<const std::byte*>(p);
    for (const auto& [start, size] : ranges_) {
      if (b >= start && b + bytes <= start + size) return true;
    }
    return false;
  }

  teeny::CpuContext cpu;
  std::vector<Site> sites;  // every prepare, in order
  bool capturing = false;
  Graph recorded;
  bool fail_uploads = false;
  bool fail_launches = false;
  std::optional<teeny::Error> error;
  int uploads = 0;
  std::size_t uploaded_bytes = 0;
  int downloads = 0;
  int device_copies = 0;
  int launches = 0;  // run eagerly (not recorded)
  int captures = 0;
  int replays = 0;
  int zeroed = 0;
  int backward_launches = 0;

 private:
  std::vector<std::pair<const std::byte*, std::size_t>> ranges_;
};

using HostDevice = HostDeviceOf<true>;

// Every standard op runs on HostDevice through its CPU kernel.
template <class Op, bool Trains>
  requires teeny::KernelFor<teeny::CpuContext, Op>
auto prepare_kernel(const Op& op, const typename Op::Args& args, HostDeviceOf<Trains>& device,
                    const teeny::LaunchSite& site) {
  device.sites.push_back({std::string(site.node), site.launch, site.grid, site.block});
  return teeny::prepare_kernel_at(op, args, device.cpu, site);
}
template <class Op, class State, bool Trains>
  requires teeny::KernelFor<teeny::CpuContext, Op>
void run_kernel(const Op& op, const typename Op::Args& args, State& state, HostDeviceOf<Trains>& device) {
  if (device.fail_launches) {
    if (!device.error) device.error = teeny::Error(teeny::Errc::device, "the device refused a launch");
    return;
  }
  if (device.capturing) {
    device.recorded.push_back([&op, &args, &state, &device] { run_kernel(op, args, state, device.cpu); });
    return;
  }
  ++device.launches;
  run_kernel(op, args, state, device.cpu);
}

#if TEENY_TRAINING
// A training forward refreshes what a kernel prepared from the parameters (packed weights), which
// an update has moved, as the CPU backend does.
template <class Op, class State, bool Trains>
  requires teeny::RefreshableKernel<teeny::CpuContext, Op, State>
teeny::Result<void> refresh_kernel(const Op& op, const typename Op::Args& args, State& state,
                                   HostDeviceOf<Trains>& device) {
  return refresh_kernel(op, args, state, device.cpu);
}

// And every backward, through the CPU's backward kernels, told its node and backward geometry.
template <class Op>
  requires teeny::BackwardKernelFor<teeny::CpuContext, Op>
auto prepare_backward_kernel(const Op& op, const typename Op::BackwardArgs& args, HostDevice& device,
                             const teeny::LaunchSite& site) {
  device.sites.push_back({std::string(site.node), site.launch, site.grid, site.block});
  return prepare_backward_kernel(op, args, device.cpu);
}
template <class Op, class State>
  requires teeny::BackwardKernelFor<teeny::CpuContext, Op>
void run_backward_kernel(const Op& op, const typename Op::BackwardArgs& args, State& state, HostDevice& device) {
  if (device.capturing) {
    device.recorded.push_back([&op, &args, &state, &device] { run_backward_kernel(op, args, state, device.cpu); });
    return;
  }
  ++device.backward_launches;
  run_backward_kernel(op, args, state, device.cpu);
}
#endif

using Model = teeny::LoadedModel<HostDevice, teeny::standard_ops<float>>;
static_assert(teeny::DeviceMemoryBackend<HostDevice> && teeny::DeviceCopyBackend<HostDevice> &&
              teeny::GraphBackend<HostDevice> && teeny::ReportsRunErrors<HostDevice>);
static_assert(teeny::DeviceTrainingBackend<HostDevice> && !teeny::DeviceTrainingBackend<HostDeviceOf<false>>);
static_assert(!teeny::DeviceMemoryBackend<teeny::CpuContext> && !teeny::DeviceCopyBackend<teeny::CpuContext> &&
              !teeny::GraphBackend<teeny::CpuContext>);

Model load(const teeny::Graph& graph, std::int64_t batch) {
  auto lowered = teeny::standard_lowering<float>{}.lower(graph, teeny::LoweringMode::inference);
  REQUIRE(lowered);
  auto model = Model::load(graph, std::move(*lowered), HostDevice(teeny::CpuContext{}), {{"batch", batch}});
  REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
  return std::move(*model);
}

teeny::Graph built(teeny::Result<teeny::Graph> graph) {
  REQUIRE_MESSAGE(graph, (graph ? "" : graph.error().to_string()));
  return std::move(*graph);
}

std::vector<float> output_of(Model& model, std::string_view name, std::size_t count) {
  std::vector<float> out(count);
  auto copied = model.copy_output(name, std::as_writable_bytes(std::span(out)));
  REQUIRE_MESSAGE(copied, (copied ? "" : copied.error().to_string()));
  return out;
}

}  // namespace fake

TEST_CASE("device plan: parameters and activations live in the backend's memory, reached only by copies") {
  auto fx = fixtures::model("mlp");
  const teeny::Graph graph = fake::built(models::mlp());
  fake::Model model = fake::load(graph, fx.x.shape()[0]);
  auto& device = model.backend();

  // Loading uploaded every parameter (their initial values) once, into the backend's memory.
  const auto stats = model.stats();
  CHECK(device.uploaded_bytes == stats.parameter_bytes);
  const int uploads_at_load = device.uploads;
  CHECK(uploads_at_load == 6);  // three weights, three biases

  // load_weights fills the host copies and uploads them again.
  REQUIRE(model.load_weights(fx.file, {.strict = false}));
  CHECK(device.uploads == 2 * uploads_at_load);
  CHECK(device.uploaded_bytes == 2 * stats.parameter_bytes);

  // A forward uploads its input, runs every launch and copies nothing back until asked.
  const teeny::TensorRef input[] = {teeny::TensorRef::of("x", fx.x)};
  REQUIRE(model.forward(input));
  CHECK(device.uploads == 2 * uploads_at_load + 1);
  CHECK(device.launches == static_cast<int>(stats.steps));
  CHECK(device.downloads == 0);

  // The logits, downloaded, are PyTorch's; the output binding points into device memory.
  auto logits = model.output("logits");
  REQUIRE(logits);
  CHECK(device.on_device(logits->data, 1));
  const auto got = fake::output_of(model, "logits", static_cast<std::size_t>(fx.logits.numel()));
  CHECK(device.downloads == 1);
  auto tensor = teeny::Tensor::zeros(teeny::DType::f32, logits->shape);
  REQUIRE(tensor);
  std::memcpy(tensor->data(), got.data(), tensor->bytes());
  fixtures::check_close(teeny::TensorBinding{tensor->data(), teeny::DType::f32, tensor->shape(), 0}, fx.logits);

  // The Model concept's forward copies its outputs out through the backend too.
  std::vector<teeny::NamedTensor> inputs;
  inputs.push_back({"x", std::move(*fx.file.read("in.x"))});
  auto outputs = model.forward(std::move(inputs));
  REQUIRE(outputs);
  REQUIRE(outputs->size() == 1);
  CHECK(device.downloads == 2);
  CHECK(std::memcmp((*outputs)[0].tensor.data(), got.data(), tensor->bytes()) == 0);

  // A buffer of the wrong size is refused, naming the output and both sizes.
  std::vector<float> small(3);
  auto refused = model.copy_output("logits", std::as_writable_bytes(std::span(small)));
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message().find("output 'logits'") != std::string::npos);
  CHECK(refused.error().message().find("has 120 bytes, but the buffer given for it has 12") != std::string::npos);
}

TEST_CASE("device plan: inputs already in device memory are copied on the device, never through the host") {
  auto fx = fixtures::model("mlp");
  const teeny::Graph graph = fake::built(models::mlp());
  fake::Model model = fake::load(graph, fx.x.shape()[0]);
  REQUIRE(model.load_weights(fx.file, {.strict = false}));
  auto& device = model.backend();

  // The input placed in the backend's memory by the caller (as their own kernel would write it).
  auto memory = device.allocate(fx.x.bytes());
  REQUIRE(memory);
  std::memcpy(memory->data(), fx.x.data(), fx.x.bytes());
  const std::span<const std::byte> on_device(static_cast<const std::byte*>(memory->data()), fx.x.bytes());
  const teeny::TensorRef input[] = {{"x", fx.x.dtype(), fx.x.shape(), on_device}};
  const int uploads = device.uploads;
  REQUIRE(model.forward_on_device(input));
  CHECK(device.uploads == uploads);  // nothing came from the host
  CHECK(device.device_copies == 1);
  const auto got = fake::output_of(model, "logits", static_cast<std::size_t>(fx.logits.numel()));
  auto tensor = teeny::Tensor::zeros(teeny::DType::f32, fx.logits.shape());
  REQUIRE(tensor);
  std::memcpy(tensor->data(), got.data(), tensor->bytes());
  fixtures::check_close(teeny::TensorBinding{tensor->data(), teeny::DType::f32, tensor->shape(), 0}, fx.logits);

  // Checked as forward's inputs are, before anything is copied: a wrong name, a byte count that
  // does not fill the shape.
  const teeny::TensorRef misnamed[] = {{"image", fx.x.dtype(), fx.x.shape(), on_device}};
  auto refused = model.forward_on_device(misnamed);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message().find("no input 'image'") != std::string::npos);
  const teeny::TensorRef short_input[] = {{"x", fx.x.dtype(), fx.x.shape(), on_device.first(on_device.size() - 4)}};
  refused = model.forward_on_device(short_input);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message().find("input 'x' has") != std::string::npos);
  CHECK(device.device_copies == 1);
}

TEST_CASE("device plan: each launch is prepared once, told its node, launch index and geometry") {
  auto fx = fixtures::model("lenet");
  const teeny::Graph graph = fake::built(models::lenet());
  fake::Model model = fake::load(graph, fx.x.shape()[0]);
  auto& device = model.backend();
  CHECK(device.sites.size() == model.stats().steps);

  // Each site is a node of the lowered DAG with the geometry its op gives (block, grid_for_launch).
  const auto& dag = model.dag();
  std::size_t checked = 0;
  for (const fake::Site& site : device.sites) {
    CAPTURE(site.node);
    bool found = false;
    for (teeny::NodeId id = 0; id < dag.size(); ++id) {
      if (dag[id].name != site.node) continue;
      found = true;
      std::visit(
          [&]<class Op>(const Op& op) {
            if constexpr (!teeny::InputOpType<Op>) {
              CHECK(site.block == op.block());
              CHECK(site.launch < teeny::n_launches(op));
              ++checked;
            }
          },
          dag[id].op);
    }
    CHECK(found);
  }
  CHECK(checked == device.sites.size());

  // load_weights prepares every launch again (kernel states may derive from the weights).
  REQUIRE(model.load_weights(fx.file, {.strict = false}));
  CHECK(device.sites.size() == 2 * model.stats().steps);
}

TEST_CASE("device plan: graph replay captures once per plan and gives eager forward's outputs") {
  auto fx = fixtures::model("lenet");
  const teeny::Graph graph = fake::built(models::lenet());
  const std::int64_t batch = fx.x.shape()[0];
  fake::Model eager = fake::load(graph, batch);
  fake::Model replayed = fake::load(graph, batch);
  REQUIRE(eager.load_weights(fx.file, {.strict = false}));
  REQUIRE(replayed.load_weights(fx.file, {.strict = false}));
  REQUIRE(replayed.set_graph_replay(true));
  CHECK(replayed.graph_replay());
  auto& device = replayed.backend();
  const auto count = static_cast<std::size_t>(fx.logits.numel());

  // The fixture's images, then the same images scaled: replay must read each forward's input.
  auto scaled = teeny::Tensor::zeros(teeny::DType::f32, fx.x.shape());
  REQUIRE(scaled);
  for (std::int64_t i = 0; i < fx.x.numel(); ++i) scaled->view<float>()->data[i] = 0.5f * fx.x.view<float>()->data[i];
  for (const teeny::Tensor* x : {&fx.x, &*scaled, &fx.x}) {
    const teeny::TensorRef input[] = {teeny::TensorRef::of("x", *x)};
    REQUIRE(eager.forward(input));
    REQUIRE(replayed.forward(input));
    CHECK(fake::output_of(eager, "logits", count) == fake::output_of(replayed, "logits", count));
  }
  CHECK(device.captures == 1);
  CHECK(device.replays == 3);
  CHECK(device.launches == 0);  // nothing ran outside the graph
  fixtures::check_close(*eager.output("logits"), fx.logits);

  // Another batch size: a plan of its own, captured on its first forward.
  teeny::ConcreteShape shape = fx.x.shape();
  shape[0] = 2 * batch;
  auto twice = teeny::Tensor::zeros(teeny::DType::f32, shape);
  REQUIRE(twice);
  std::memcpy(twice->data(), fx.x.data(), fx.x.bytes());
  std::memcpy(twice->data() + fx.x.bytes(), scaled->data(), fx.x.bytes());
  const teeny::TensorRef doubled[] = {teeny::TensorRef::of("x", *twice)};
  REQUIRE(eager.forward(doubled));
  REQUIRE(replayed.forward(doubled));
  CHECK(device.captures == 2);
  CHECK(fake::output_of(eager, "logits", 2 * count) == fake::output_of(replayed, "logits", 2 * count));

  // New weights: every plan's graph is captured again, and reads them.
  REQUIRE(replayed.load_weights(fx.file, {.strict = false}));
  REQUIRE(replayed.forward(doubled));
  CHECK(device.captures == 3);

  // Off again: eager launches.
  REQUIRE(replayed.set_graph_replay(false));
  REQUIRE(replayed.forward(doubled));
  CHECK(device.launches == static_cast<int>(replayed.stats().steps));
}

TEST_CASE("device plan: a refused copy or launch comes back from forward as an error") {
  auto fx = fixtures::model("mlp");
  const teeny::Graph graph = fake::built(models::mlp());
  fake::Model model = fake::load(graph, fx.x.shape()[0]);
  const teeny::TensorRef input[] = {teeny::TensorRef::of("x", fx.x)};

  model.backend().fail_uploads = true;
  auto upload = model.forward(input);
  REQUIRE_FALSE(upload);
  CHECK(upload.error().code() == teeny::Errc::device);
  CHECK(upload.error().message().find("input 'x'") != std::string::npos);
  model.backend().fail_uploads = false;

  model.backend().fail_launches = true;
  auto launch = model.forward(input);
  REQUIRE_FALSE(launch);
  CHECK(launch.error().message().find("refused a launch") != std::string::npos);
  model.backend().fail_launches = false;
  CHECK(model.forward(input));  // the error was handed over once, not kept

  // During a capture too: the capture's error, with what was being done.
  REQUIRE(model.set_graph_replay(true));
  model.backend().fail_launches = true;
  auto captured = model.forward(input);
  REQUIRE_FALSE(captured);
  CHECK(captured.error().message().find("capturing the forward") != std::string::npos);
  model.backend().fail_launches = false;
  CHECK(model.forward(input));
}

#if TEENY_TRAINING
namespace fake {
// The same weights in a CPU model and a device model, both lowered for training.
void copy_weights(const teeny::CpuModel& from, Model& to) {
  const auto params = from.parameters();
  auto source = teeny::ParamSource::of(params);
  REQUIRE(source);
  auto loaded = to.load_weights(*source, {});
  REQUIRE_MESSAGE(loaded, (loaded ? "" : loaded.error().to_string()));
}
}  // namespace fake

TEST_CASE("device plan: a model lowered for training trains on a device backend as on the CPU backend") {
  for (const auto& [name, replay] : {std::pair{"mlp", false}, std::pair{"lenet", false}, std::pair{"lenet", true}}) {
    CAPTURE(name);
    CAPTURE(replay);
    auto fx = fixtures::model(name);
    // (LeNet with batch norm: its training phase and running statistics.)
    const teeny::Graph graph = fake::built(std::string(name) == "mlp" ? models::mlp() : models::lenet_bn());
    const std::int64_t batch = fx.x.shape()[0];
    auto cpu = teeny::load_cpu_for_training<float>(graph, {{"batch", batch}}, {.threads = 1});
    REQUIRE_MESSAGE(cpu, (cpu ? "" : cpu.error().to_string()));
    REQUIRE(teeny::init_parameters(*cpu, 5));
    auto lowered = teeny::standard_lowering<float>{}.lower(graph, teeny::LoweringMode::training);
    REQUIRE(lowered);
    auto loaded =
        fake::Model::load(graph, std::move(*lowered), fake::HostDevice(teeny::CpuContext{}), {{"batch", batch}});
    REQUIRE_MESSAGE(loaded, (loaded ? "" : loaded.error().to_string()));
    fake::Model& device_model = *loaded;
    fake::copy_weights(*cpu, device_model);
    auto& device = device_model.backend();
    // The gradients were zeroed in device memory at load, one buffer per trained parameter.
    const auto trained = device_model.device_parameter_gradients();
    REQUIRE(trained.size() == cpu->parameter_gradients().size());
    for (const auto& p : trained) CHECK(device.on_device(p.grad.data, 1));

    // Two forward/backward passes with the same dL/dlogits: gradients accumulate, as on the CPU.
    // Replayed, each pass is two graph launches (the forward's, the backward's), captured once.
    if (replay) REQUIRE(device_model.set_graph_replay(true));
    const teeny::TensorRef input[] = {teeny::TensorRef::of("x", fx.x)};
    std::vector<float> dlogits(static_cast<std::size_t>(fx.logits.numel()));
    for (std::size_t i = 0; i < dlogits.size(); ++i) dlogits[i] = 0.01F * static_cast<float>(i % 7) - 0.03F;
    for (int pass = 0; pass < 2; ++pass) {
      REQUIRE(cpu->forward(input));
      REQUIRE(device_model.forward(input));
      auto grad = cpu->output_grad("logits");
      REQUIRE(grad);
      std::memcpy(grad->data, dlogits.data(), dlogits.size() * sizeof(float));
      REQUIRE(device_model.set_output_grad("logits", std::as_bytes(std::span(dlogits))));
      REQUIRE(cpu->backward());
      auto ran = device_model.backward();
      REQUIRE_MESSAGE(ran, (ran ? "" : ran.error().to_string()));
    }
    CHECK((device.backward_launches > 0) != replay);  // replayed, every backward launch is the graph's
    CHECK(device.zeroed > 0);
    CHECK(device.captures == (replay ? 2 : 0));
    CHECK(device.replays == (replay ? 4 : 0));
    for (const auto& want : cpu->parameter_gradients()) {
      CAPTURE(want.key);
      const auto bytes = static_cast<std::size_t>(want.grad.shape.numel()) * sizeof(float);
      std::vector<float> got(bytes / sizeof(float));
      REQUIRE(device_model.copy_gradient(want.key, std::as_writable_bytes(std::span(got))));
      CHECK(std::memcmp(got.data(), want.grad.data, bytes) == 0);  // the same kernels, bit for bit
    }

    // zero_grad clears them on the device; a buffer of the wrong size is refused, naming the key.
    REQUIRE(device_model.zero_grad());
    const auto& first = trained.front();
    std::vector<float> zeros(static_cast<std::size_t>(first.grad.shape.numel()), 1.0F);
    REQUIRE(device_model.copy_gradient(first.key, std::as_writable_bytes(std::span(zeros))));
    CHECK(std::all_of(zeros.begin(), zeros.end(), [](float v) { return v == 0.0F; }));
    zeros.pop_back();
    auto refused = device_model.copy_gradient(first.key, std::as_writable_bytes(std::span(zeros)));
    REQUIRE_FALSE(refused);
    CHECK(refused.error().message().find(std::string(first.key)) != std::string::npos);

    // download_parameters brings the device's parameters back to the host copies.
    REQUIRE(device_model.download_parameters());
    const auto host = device_model.parameters();
    const auto reference = cpu->parameters();
    REQUIRE(host.size() == reference.size());
    for (std::size_t i = 0; i < host.size(); ++i) {
      CAPTURE(host[i].name);
      REQUIRE(host[i].data.size() == reference[i].data.size());
      CHECK(std::memcmp(host[i].data.data(), reference[i].data.data(), host[i].data.size()) == 0);
    }
  }
}

namespace fake {
// The update both sides of the training-step test take: w -= lr g.
void descend(float* w, const float* g, float lr, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) w[i] -= lr * g[i];
}

// A loss and an update as a device training step queues them (TrainingStepParts), on HostDevice:
// dL/dlogits = logits - target, and plain gradient descent. stage() copies this step's target and
// learning rate to "device" memory; what the queue functions queue reads them there, recorded
// while the device captures, as the model's own launches are.
struct StepParts {
  Model& model;
  std::span<const float> target;  // this step's, host memory
  float lr = 0;
  std::uint64_t key = 1;
  DeviceMemory staged_target{};
  DeviceMemory staged_lr{};
  int stages = 0;
  int queued = 0;

  void run(HostDevice& device, std::function<void()> work) {
    if (device.capturing) {
      device.recorded.push_back(std::move(work));
    } else {
      work();
    }
  }
  teeny::Result<void> stage() {
    HostDevice& device = model.backend();
    if (staged_target.data() == nullptr) {
      auto t = device.allocate(target.size_bytes());
      auto r = device.allocate(sizeof(float));
      REQUIRE(t);
      REQUIRE(r);
      staged_target = std::move(*t);
      staged_lr = std::move(*r);
    }
    ++stages;
    if (auto sent = device.upload(staged_target.data(), target.data(), target.size_bytes()); !sent) return sent;
    return device.upload(staged_lr.data(), &lr, sizeof lr);
  }
  teeny::Result<void> queue_loss() {
    ++queued;
    auto y = model.output("logits");
    auto g = model.output_grad("logits");
    REQUIRE(y);
    REQUIRE(g);
    const auto* out = static_cast<const float*>(y->data);
    auto* grad = static_cast<float*>(g->data);
    const auto* t = static_cast<const float*>(staged_target.data());
    const std::int64_t n = y->shape.numel();
    run(model.backend(), [=] {
      for (std::int64_t i = 0; i < n; ++i) grad[i] = out[i] - t[i];
    });
    return teeny::ok();
  }
  teeny::Result<void> queue_update() {
    for (const auto& p : model.device_parameter_gradients()) {
      auto* w = static_cast<float*>(p.value.data);
      const auto* g = static_cast<const float*>(p.grad.data);
      const auto* rate = static_cast<const float*>(staged_lr.data());
      const std::int64_t n = p.value.shape.numel();
      run(model.backend(), [=] { descend(w, g, *rate, n); });
    }
    return teeny::ok();
  }
  std::uint64_t capture_key() const { return key; }
};
static_assert(teeny::TrainingStepParts<StepParts>);
}  // namespace fake

TEST_CASE("device plan: a training step runs whole, and replayed as one graph gives the eager step's parameters") {
  auto fx = fixtures::model("lenet");
  const teeny::Graph graph = fake::built(models::lenet_bn());
  const std::int64_t batch = fx.x.shape()[0];
  auto cpu = teeny::load_cpu_for_training<float>(graph, {{"batch", batch}}, {.threads = 1});
  REQUIRE(cpu);
  REQUIRE(teeny::init_parameters(*cpu, 7));
  const auto load_device = [&] {
    auto lowered = teeny::standard_lowering<float>{}.lower(graph, teeny::LoweringMode::training);
    REQUIRE(lowered);
    auto loaded =
        fake::Model::load(graph, std::move(*lowered), fake::HostDevice(teeny::CpuContext{}), {{"batch", batch}});
    REQUIRE_MESSAGE(loaded, (loaded ? "" : loaded.error().to_string()));
    fake::copy_weights(*cpu, *loaded);
    return std::move(*loaded);
  };
  fake::Model eager = load_device();
  fake::Model replayed = load_device();
  REQUIRE(replayed.set_graph_replay(true));
  auto& device = replayed.backend();

  const auto count = static_cast<std::size_t>(fx.logits.numel());
  std::vector<float> target(count);
  fake::StepParts eager_parts{eager, target};
  fake::StepParts replayed_parts{replayed, target};
  const teeny::TensorRef input[] = {teeny::TensorRef::of("x", fx.x)};
  // Each step its own target and learning rate: a replay must read this step's, not the captured.
  for (int step = 0; step < 3; ++step) {
    CAPTURE(step);
    for (std::size_t i = 0; i < count; ++i) target[i] = 0.1F * static_cast<float>((i + step) % 5) - 0.2F;
    const float lr = 0.05F / static_cast<float>(step + 1);
    eager_parts.lr = replayed_parts.lr = lr;
    auto ran = eager.training_step(input, eager_parts);
    REQUIRE_MESSAGE(ran, (ran ? "" : ran.error().to_string()));
    ran = replayed.training_step(input, replayed_parts);
    REQUIRE_MESSAGE(ran, (ran ? "" : ran.error().to_string()));

    // The CPU backend, the same step by hand: forward, dL/dlogits, backward, descent.
    REQUIRE(cpu->forward(input));
    auto logits = cpu->output("logits");
    auto dlogits = cpu->output_grad("logits");
    REQUIRE(logits);
    REQUIRE(dlogits);
    for (std::size_t i = 0; i < count; ++i) {
      static_cast<float*>(dlogits->data)[i] = static_cast<const float*>(logits->data)[i] - target[i];
    }
    cpu->zero_grad();
    REQUIRE(cpu->backward());
    for (const auto& p : cpu->parameter_gradients()) {
      fake::descend(static_cast<float*>(p.value.data), static_cast<const float*>(p.grad.data), lr,
                    p.value.shape.numel());
    }
    CHECK(fake::output_of(eager, "logits", count) == fake::output_of(replayed, "logits", count));
    REQUIRE(eager.download_parameters());
    REQUIRE(replayed.download_parameters());
    const auto want = cpu->parameters();
    const auto got_eager = eager.parameters();
    const auto got_replayed = replayed.parameters();
    REQUIRE(got_eager.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
      CAPTURE(want[i].name);
      // The same kernels in the same order: bit for bit, eager, replayed and on the CPU.
      CHECK(std::memcmp(got_eager[i].data.data(), want[i].data.data(), want[i].data.size()) == 0);
      CHECK(std::memcmp(got_replayed[i].data.data(), want[i].data.data(), want[i].data.size()) == 0);
    }
  }
  // Replayed: captured once (the loss and update queued then only), then one graph launch a step;
  // staged every step.
  CHECK(device.captures == 1);
  CHECK(device.replays == 3);
  CHECK(device.launches == 0);
  CHECK(device.backward_launches == 0);
  CHECK(replayed_parts.stages == 3);
  CHECK(replayed_parts.queued == 1);
  CHECK(eager_parts.queued == 3);

  // Another capture key (other buffers): captured again; so is it after new weights.
  replayed_parts.key = 2;
  REQUIRE(replayed.training_step(input, replayed_parts));
  CHECK(device.captures == 2);
  REQUIRE(replayed.training_step(input, replayed_parts));
  CHECK(device.captures == 2);
  fake::copy_weights(*cpu, replayed);
  REQUIRE(replayed.training_step(input, replayed_parts));
  CHECK(device.captures == 3);

  // A failure while capturing comes back naming the step, and leaves no graph behind.
  replayed_parts.key = 3;
  device.fail_launches = true;
  auto failed = replayed.training_step(input, replayed_parts);
  REQUIRE_FALSE(failed);
  CHECK(failed.error().message().find("capturing the training step") != std::string::npos);
  device.fail_launches = false;
  REQUIRE(replayed.training_step(input, replayed_parts));
  CHECK(device.captures == 5);
}

TEST_CASE("device plan: a model lowered for training is refused on a device backend that cannot zero memory") {
  const teeny::Graph graph = fake::built(models::mlp());
  auto lowered = teeny::standard_lowering<float>{}.lower(graph, teeny::LoweringMode::training);
  REQUIRE(lowered);
  using InferenceOnly = teeny::LoadedModel<fake::HostDeviceOf<false>, teeny::standard_ops<float>>;
  auto model =
      InferenceOnly::load(graph, std::move(*lowered), fake::HostDeviceOf<false>(teeny::CpuContext{}), {{"batch", 2}});
  REQUIRE_FALSE(model);
  CHECK(model.error().code() == teeny::Errc::unsupported);
  CHECK(model.error().message().find("zero its device memory") != std::string::npos);
}
#endif
