// teeny.train optimizers against PyTorch 1.13 (tests/fixtures/train/optimizers.safetensors): five
// steps over two parameter groups, the parameters after each step and the state after the last;
// state save/load (bitwise resume, strict checks); option errors; allocation-free step.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

import teeny.core;
import teeny.io;
import teeny.train;

#include "support/allocation_counter.hpp"
#include "train/train_test_support.hpp"

using teeny::ConcreteShape;
using teeny::DType;
using teeny::Errc;
using teeny::Parameter;
using teeny::ParamGroup;
using teeny::Tensor;
using teeny::TensorRef;
using namespace train_test;

namespace {

const std::vector<ConcreteShape> shapes{{3, 4}, {4}, {2, 3}};  // group 0: p0, p1; group 1: p2

/// Runs fixture case `c` (options o0 for group 0, o1 for group 1) and checks every step and the state.
template <class Opt, class T, class Options>
void check_case(const std::string& c, const Options& o0, const Options& o1) {
  CAPTURE(c);
  const auto f = open("optimizers.safetensors");
  OwnedParams<T> p(shapes);
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const Tensor init = read<T>(f, c + ".param.0." + std::to_string(i));
    std::memcpy(p.values[i].data(), init.data(), init.bytes());
  }
  std::vector<ParamGroup<T, Options>> groups{{{p.params[0], p.params[1]}, o0}, {{p.params[2]}, o1}};
  auto opt = Opt::create(std::move(groups));
  REQUIRE_MESSAGE(opt, (opt ? "" : opt.error().to_string()));
  for (int step = 1; step <= 5; ++step) {
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      const Tensor g = read<T>(f, c + ".grad." + std::to_string(step) + "." + std::to_string(i));
      std::memcpy(p.grads[i].data(), g.data(), g.bytes());
    }
    opt->step();
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      check_close<T>(elements<T>(p.values[i]), f, c + ".param." + std::to_string(step) + "." + std::to_string(i));
    }
  }
  // The state: the same keys as PyTorch's state_dict, the same values.
  std::set<std::string> ours;
  for (const TensorRef& t : opt->state_tensors()) {
    const std::string key = c + "." + std::string(t.name);
    ours.insert(key);
    REQUIRE_MESSAGE(f.find(key) != nullptr, key);
    if (t.dtype == DType::i64) {
      std::int64_t step = 0;
      std::memcpy(&step, t.data.data(), sizeof step);
      const Tensor want = read<std::int64_t>(f, key);
      CHECK(step == *reinterpret_cast<const std::int64_t*>(want.data()));
    } else {
      CHECK(t.dtype == teeny::dtype_of<T>);
      check_close<T>({reinterpret_cast<const T*>(t.data.data()), t.data.size() / sizeof(T)}, f, key);
    }
  }
  for (const auto& e : f.entries()) {
    if (e.name.starts_with(c + ".state.")) CHECK_MESSAGE(ours.contains(e.name), e.name);
  }
}

}  // namespace

TEST_CASE_TEMPLATE("SGD matches PyTorch", T, float, double) {
  using teeny::SgdOptions;
  using Sgd = teeny::Sgd<T>;
  check_case<Sgd, T>("sgd", SgdOptions{.lr = 0.1}, SgdOptions{.lr = 0.05});
  check_case<Sgd, T>("sgd_momentum", SgdOptions{.lr = 0.1, .momentum = 0.9}, SgdOptions{.lr = 0.05, .momentum = 0.5});
  check_case<Sgd, T>("sgd_dampening", SgdOptions{.lr = 0.1, .momentum = 0.9, .dampening = 0.5},
                     SgdOptions{.lr = 0.05, .momentum = 0.9});
  check_case<Sgd, T>("sgd_nesterov", SgdOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true}, SgdOptions{.lr = 0.05});
  check_case<Sgd, T>("sgd_weight_decay", SgdOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01},
                     SgdOptions{.lr = 0.05, .weight_decay = 0.1});
}

TEST_CASE_TEMPLATE("Adam and AdamW match PyTorch", T, float, double) {
  using teeny::AdamOptions;
  using teeny::AdamWOptions;
  using Adam = teeny::Adam<T>;
  using AdamW = teeny::AdamW<T>;
  check_case<Adam, T>("adam", AdamOptions{}, AdamOptions{.lr = 1e-2, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6});
  check_case<Adam, T>("adam_weight_decay", AdamOptions{.lr = 1e-2, .weight_decay = 0.1}, AdamOptions{.lr = 1e-2});
  check_case<Adam, T>("adam_amsgrad", AdamOptions{.lr = 1e-2, .amsgrad = true},
                      AdamOptions{.lr = 1e-3, .weight_decay = 0.01, .amsgrad = true});
  check_case<AdamW, T>("adamw", AdamWOptions{.lr = 1e-2}, AdamWOptions{.lr = 1e-3, .weight_decay = 0.0});
  check_case<AdamW, T>("adamw_amsgrad", AdamWOptions{.lr = 1e-2, .weight_decay = 0.1, .amsgrad = true},
                       AdamWOptions{.lr = 1e-2});
}

TEST_CASE("optimizers: defaults are PyTorch's") {
  constexpr teeny::AdamOptions adam;
  CHECK((adam.lr == 1e-3 && adam.beta1 == 0.9 && adam.beta2 == 0.999 && adam.eps == 1e-8 && adam.weight_decay == 0 &&
         !adam.amsgrad));
  constexpr teeny::AdamWOptions adamw;
  CHECK((adamw.lr == 1e-3 && adamw.weight_decay == 1e-2));
  constexpr teeny::SgdOptions sgd;
  CHECK((std::isnan(sgd.lr) && sgd.momentum == 0 && sgd.dampening == 0 && sgd.weight_decay == 0 && !sgd.nesterov));
}

namespace {

/// A deterministic gradient for step s.
template <class T>
void fill_grads(OwnedParams<T>& p, int s) {
  for (std::size_t i = 0; i < p.grads.size(); ++i) {
    std::span<T> g = elements<T>(p.grads[i]);
    for (std::size_t j = 0; j < g.size(); ++j) g[j] = static_cast<T>(std::sin(0.7 * s + 1.3 * j + 0.1 * i));
  }
}

template <class T>
void fill_values(OwnedParams<T>& p) {
  for (std::size_t i = 0; i < p.values.size(); ++i) {
    std::span<T> v = elements<T>(p.values[i]);
    for (std::size_t j = 0; j < v.size(); ++j) v[j] = static_cast<T>(std::cos(0.3 * j + i));
  }
}

/// 20 steps in one go equal 10 steps, saving the state to a file, a new optimizer loading it and
/// 10 more steps, bit for bit.
template <class Opt, class T, class Options>
void check_resume(const Options& o0, const Options& o1, const std::string& file) {
  auto make = [&](OwnedParams<T>& p) {
    auto opt = Opt::create({{{p.params[0], p.params[1]}, o0}, {{p.params[2]}, o1}});
    REQUIRE_MESSAGE(opt, (opt ? "" : opt.error().to_string()));
    return std::move(*opt);
  };
  OwnedParams<T> straight(shapes);
  fill_values(straight);
  auto a = make(straight);
  for (int s = 0; s < 20; ++s) {
    fill_grads(straight, s);
    a.step();
  }

  OwnedParams<T> first(shapes);
  fill_values(first);
  auto b = make(first);
  for (int s = 0; s < 10; ++s) {
    fill_grads(first, s);
    b.step();
  }
  REQUIRE(teeny::save_safetensors(file, b.state_tensors()));

  OwnedParams<T> resumed(shapes);
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    std::memcpy(resumed.values[i].data(), first.values[i].data(), first.values[i].bytes());
  }
  auto c = make(resumed);
  auto saved = teeny::SafetensorsFile::open(file);
  REQUIRE(saved);
  auto loaded = c.load_state(*saved);
  REQUIRE_MESSAGE(loaded, (loaded ? "" : loaded.error().to_string()));
  for (int s = 10; s < 20; ++s) {
    fill_grads(resumed, s);
    c.step();
  }
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    CHECK(std::memcmp(resumed.values[i].data(), straight.values[i].data(), straight.values[i].bytes()) == 0);
  }
  std::filesystem::remove(file);
}

}  // namespace

TEST_CASE_TEMPLATE("optimizer state survives save and load: 10 + 10 steps == 20 steps bitwise", T, float, double) {
  const std::string dir = TEENY_BUILD_DIR;
  check_resume<teeny::Adam<T>, T>(teeny::AdamOptions{.lr = 1e-2, .weight_decay = 0.1, .amsgrad = true},
                                  teeny::AdamOptions{.lr = 1e-3}, dir + "/train_resume_adam.safetensors");
  check_resume<teeny::AdamW<T>, T>(teeny::AdamWOptions{.lr = 1e-2}, teeny::AdamWOptions{.lr = 1e-3, .amsgrad = true},
                                   dir + "/train_resume_adamw.safetensors");
  check_resume<teeny::Sgd<T>, T>(teeny::SgdOptions{.lr = 0.1, .momentum = 0.9, .dampening = 0.3},
                                 teeny::SgdOptions{.lr = 0.05}, dir + "/train_resume_sgd.safetensors");
}

TEST_CASE("load_state reports every problem at once and changes nothing") {
  OwnedParams<float> p(shapes);
  auto opt = teeny::Adam<float>::create({{{p.params[0], p.params[1]}, {}}, {{p.params[2]}, {.amsgrad = true}}});
  REQUIRE(opt);
  auto other = teeny::Adam<float>::create(p.span());
  REQUIRE(other);
  fill_grads(p, 1);
  other->step();
  other->step();

  std::vector<TensorRef> refs = other->state_tensors();  // p2 lacks max_exp_avg_sq (no amsgrad there)
  const std::vector<double> wrong_dtype(4);
  const std::vector<float> wrong_shape(5);
  const std::int64_t negative = -2;
  const std::vector<float> extra(3);
  for (TensorRef& r : refs) {
    if (r.name == "state.1.exp_avg") r = {"state.1.exp_avg", DType::f64, {4}, std::as_bytes(std::span(wrong_dtype))};
    if (r.name == "state.1.exp_avg_sq")
      r = {"state.1.exp_avg_sq", DType::f32, {5}, std::as_bytes(std::span(wrong_shape))};
    if (r.name == "state.0.step") r = {"state.0.step", DType::i64, {}, std::as_bytes(std::span(&negative, 1))};
  }
  refs.push_back({"state.9.exp_avg", DType::f32, {3}, std::as_bytes(std::span(extra))});
  auto loaded = opt->load_state(refs);
  REQUIRE_FALSE(loaded);
  const std::string& m = loaded.error().message();
  INFO(m);
  CHECK(contains(m, "Adam: cannot load the optimizer state (5 problems):"));
  CHECK(contains(m, "'state.0.step' is -2 (a step count is >= 0)"));
  CHECK(contains(m, "'state.1.exp_avg': got f64 [4] but the optimizer expects f32 [4]"));
  CHECK(contains(m, "'state.1.exp_avg_sq': got f32 [5] but the optimizer expects f32 [4]"));
  CHECK(contains(m, "unexpected: 'state.9.exp_avg' (f32 [3])"));
  CHECK(contains(m, "missing: 'state.2.max_exp_avg_sq' (f32 [2, 3])"));
  CHECK(opt->step_count(0) == 0);  // nothing loaded
  for (const TensorRef& r : opt->state_tensors()) {
    for (std::byte b : r.data) CHECK(b == std::byte{0});
  }

  // SGD: a momentum buffer is optional (it exists after a first step), but never where there is no momentum.
  auto sgd = teeny::Sgd<float>::create({{{p.params[0]}, {.lr = 0.1, .momentum = 0.9}}, {{p.params[1]}, {.lr = 0.1}}});
  REQUIRE(sgd);
  CHECK(sgd->state_tensors().empty());
  CHECK(sgd->load_state(std::span<const TensorRef>{}));
  const std::vector<float> buffer(4);
  const TensorRef stray{"state.1.momentum_buffer", DType::f32, {4}, std::as_bytes(std::span(buffer))};
  auto bad = sgd->load_state(std::span(&stray, 1));
  REQUIRE_FALSE(bad);
  CHECK(contains(bad.error().message(), "unexpected: 'state.1.momentum_buffer'"));
}

TEST_CASE("optimizers check their options and parameters like PyTorch") {
  OwnedParams<float> p(shapes);
  auto message = [](const auto& r) { return r ? std::string() : r.error().to_string(); };

  auto no_lr = teeny::Sgd<float>::create(p.span(), {});
  CHECK(contains(message(no_lr), "SGD: group 0: invalid learning rate nan (set lr: it has no default)"));
  auto nesterov = teeny::Sgd<float>::create(p.span(), {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .nesterov = true});
  CHECK(contains(message(nesterov), "nesterov momentum requires a momentum and zero dampening"));
  auto nesterov0 = teeny::Sgd<float>::create(p.span(), {.lr = 0.1, .nesterov = true});
  CHECK(contains(message(nesterov0), "nesterov momentum requires a momentum"));
  auto momentum = teeny::Sgd<float>::create(p.span(), {.lr = 0.1, .momentum = -1});
  CHECK(contains(message(momentum), "invalid momentum value -1"));
  auto beta = teeny::Adam<float>::create(p.span(), {.beta2 = 1.0});
  CHECK(contains(message(beta), "Adam: group 0: invalid beta parameter at index 1: 1"));
  auto eps = teeny::AdamW<float>::create(p.span(), {.eps = -1e-8});
  CHECK(contains(message(eps), "AdamW: group 0: invalid epsilon value -1e-08"));
  auto decay = teeny::AdamW<float>::create({{{p.params[0]}, {}}, {{p.params[1]}, {.weight_decay = -0.1}}});
  CHECK(contains(message(decay), "AdamW: group 1: invalid weight_decay value -0.1"));
  auto empty = teeny::Adam<float>::create(std::span<const Parameter<float>>{});
  CHECK(contains(message(empty), "Adam: got an empty parameter list"));
  auto twice = teeny::Adam<float>::create({{{p.params[0], p.params[1]}, {}}, {{p.params[0]}, {}}});
  REQUIRE_FALSE(twice);
  CHECK(twice.error().code() == Errc::duplicate);

  Parameter<float> mismatched = p.params[0];
  mismatched.key = "fc1.weight";
  mismatched.grad = *p.grads[2].view<float>();
  auto shape = teeny::Sgd<float>::create(std::span(&mismatched, 1), {.lr = 0.1});
  REQUIRE_FALSE(shape);
  CHECK(shape.error().code() == Errc::shape_mismatch);
  CHECK(contains(shape.error().message(), "SGD: parameter 0 'fc1.weight': its value is [3, 4] but its grad is [2, 3]"));
}

TEST_CASE("groups: lr settable, initial lr kept; weight_decay_groups splits by rank") {
  OwnedParams<float> p(shapes);
  auto groups = teeny::weight_decay_groups<float>(p.span(), teeny::AdamWOptions{.lr = 0.01, .weight_decay = 0.05});
  REQUIRE(groups.size() == 2);
  CHECK(groups[0].params.size() == 2);  // p0 [3, 4], p2 [2, 3]
  CHECK(groups[0].params[1].key == "p2");
  CHECK(groups[0].options.weight_decay == 0.05);
  CHECK(groups[1].params.size() == 1);  // p1 [4]
  CHECK(groups[1].options.weight_decay == 0.0);
  auto opt = teeny::AdamW<float>::create(std::move(groups));
  REQUIRE(opt);
  CHECK(opt->n_groups() == 2);
  CHECK(opt->parameters()[2].key == "p1");  // PyTorch's order: group 0's first
  REQUIRE(opt->set_lr(1, 0.5));
  CHECK(opt->lr(1) == 0.5);
  CHECK(opt->initial_lr(1) == 0.01);
  CHECK_FALSE(opt->set_lr(2, 0.1));
  CHECK_FALSE(opt->set_lr(0, -1));
  auto keys = opt->state_tensors();
  CHECK(keys[0].name == "state.0.step");
}

TEST_CASE("step, zero_grad and clip_grad_norm allocate nothing") {
  OwnedParams<float> p(shapes);
  fill_values(p);
  auto adam = teeny::Adam<float>::create(
      {{{p.params[0], p.params[1]}, {.weight_decay = 0.1, .amsgrad = true}}, {{p.params[2]}, {}}});
  auto adamw = teeny::AdamW<float>::create(p.span());
  auto sgd = teeny::Sgd<float>::create(p.span(), {.lr = 0.1, .momentum = 0.9, .nesterov = true});
  REQUIRE((adam && adamw && sgd));
  fill_grads(p, 3);
  const std::size_t before = test_support::allocation_count();
  for (int s = 0; s < 3; ++s) {
    adam->step();
    adamw->step();
    sgd->step();
    auto norm = teeny::clip_grad_norm(p.span(), 0.5);
    CHECK(norm);
  }
  sgd->zero_grad();
  teeny::zero_grad(p.span());
  CHECK(test_support::allocation_count() - before == 0);
  for (const auto& g : p.grads) {
    for (float x : elements<float>(g)) CHECK(x == 0.0f);
  }
}
