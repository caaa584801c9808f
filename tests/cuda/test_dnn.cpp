// cuDNN through kernels/cuda/dnn.hpp and teeny.cuda:dnn: loading it (or the reason it did not
// load), status names, plans refused before any GPU work, which conv launches it takes, and the
// engine a context reports. Its convolutions are checked against the CPU on a GPU by every conv
// case of test_kernels.cpp (kernel_check runs each op through a CudaContext too) and by the
// models of test_models.cpp.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "cuda/dnn.hpp"
#include "cuda/runtime.hpp"

import teeny;

#if TEENY_HAS_CUDA

namespace {

namespace ck = teeny::cuda_kernels;

constexpr int not_initialized = 1001;     // CUDNN_STATUS_NOT_INITIALIZED
constexpr int bad_param = 2000;           // CUDNN_STATUS_BAD_PARAM
constexpr int null_pointer = 2002;        // CUDNN_STATUS_BAD_PARAM_NULL_POINTER
constexpr int not_supported = 3000;       // CUDNN_STATUS_NOT_SUPPORTED
constexpr int sublibrary_missing = 1008;  // CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
std::string dnn_text(int status) {
  return std::string(ck::dnn_status_name(status)) + ": " + ck::dnn_status_string(status);
}

bool loaded() {
  const char* why = nullptr;
  return ck::dnn_load(why) == 0;
}

// A 3x3 convolution, padding 1: x [2, 4, 8, 8] -> y [2, 6, 8, 8].
ck::ConvDesc good_desc() {
  ck::ConvDesc d;
  d.n = 2;
  d.c = 4;
  d.h = 8;
  d.w = 8;
  d.o = 6;
  d.kernel_h = 3;
  d.kernel_w = 3;
  d.pad_h = 1;
  d.pad_w = 1;
  d.out_h = 8;
  d.out_w = 8;
  return d;
}

}  // namespace

TEST_CASE("cuda dnn: cuDNN loads once, or says why it did not") {
  const char* why = nullptr;
  const int status = ck::dnn_load(why);
  REQUIRE(why != nullptr);
  if (status != 0) {
    CHECK(status == ck::dnn_not_loaded);
    CHECK(std::strlen(why) > 0);
    CHECK(contains(ck::dnn_status_string(status), why));  // the reason travels with the status
  }
  // Where the CUDA toolkit installed it, the loader finds it (its lib64 is in the ld cache), and
  // every entry point teeny calls resolves.
  std::error_code error;
  if (std::filesystem::exists("/usr/local/cuda/lib64/libcudnn.so.9", error)) {
    CHECK_MESSAGE(status == 0, std::string(why));
  }
  const char* again = nullptr;
  CHECK(ck::dnn_load(again) == status);
  CHECK(again == why);
  auto module_view = teeny::cuda::load_dnn();
  CHECK(static_cast<bool>(module_view) == (status == 0));
  if (!module_view) CHECK(contains(module_view.error().to_string(), "libcudnn.so.9"));
}

TEST_CASE("cuda dnn: statuses have cuDNN's names, teeny's two their own, and each a meaning") {
  CHECK(std::string(ck::dnn_status_name(ck::dnn_not_loaded)) == "dnn_not_loaded");
  CHECK(contains(ck::dnn_status_string(ck::dnn_not_loaded), "cuDNN not loaded"));
  CHECK(std::string(ck::dnn_status_name(ck::dnn_no_algorithm)) == "dnn_no_algorithm");
  CHECK(contains(ck::dnn_status_string(ck::dnn_no_algorithm), "no deterministic algorithm"));
  CHECK(contains(ck::dnn_status_string(bad_param), "parameter"));
  CHECK(contains(ck::dnn_status_string(not_supported), "not support"));
  CHECK(std::strlen(ck::dnn_status_string(98765)) > 0);
  if (loaded()) {
    CHECK(std::string(ck::dnn_status_name(0)) == "CUDNN_STATUS_SUCCESS");
    CHECK(std::string(ck::dnn_status_name(bad_param)) == "CUDNN_STATUS_BAD_PARAM");
    CHECK(std::string(ck::dnn_status_name(not_supported)) == "CUDNN_STATUS_NOT_SUPPORTED");
  }
  // Not supported (and teeny's two) mean "teeny's kernel runs it"; other failures are errors.
  CHECK(teeny::cuda::dnn_error(not_supported, "x").code() == teeny::Errc::unsupported);
  CHECK(teeny::cuda::dnn_error(ck::dnn_no_algorithm, "x").code() == teeny::Errc::unsupported);
  CHECK(teeny::cuda::dnn_error(ck::dnn_not_loaded, "x").code() == teeny::Errc::unsupported);
  CHECK(teeny::cuda::dnn_error(sublibrary_missing, "x").code() == teeny::Errc::unsupported);
  const teeny::Error bad = teeny::cuda::dnn_error(bad_param, "planning conv1");
  CHECK(bad.code() == teeny::Errc::device);
  CHECK(contains(bad.to_string(), "planning conv1"));
}

TEST_CASE("cuda dnn: plans are refused before any GPU work: bad shapes, no handle, no library") {
  int sentinel = 0;
  void* plan = &sentinel;
  if (!loaded()) {
    CHECK(ck::conv_plan(plan, nullptr, good_desc(), 0) == ck::dnn_not_loaded);
    CHECK(plan == nullptr);
    CHECK(ck::conv_run(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0, nullptr) == ck::dnn_not_loaded);
    return;
  }
  CHECK(ck::conv_plan(plan, nullptr, good_desc(), 0) == not_initialized);
  CHECK(plan == nullptr);
  // The description is checked first: these are invalid with or without a handle.
  const auto refused = [&](const ck::ConvDesc& d) {
    plan = &sentinel;
    CHECK(ck::conv_plan(plan, nullptr, d, 0) == bad_param);
    CHECK(plan == nullptr);
  };
  for (std::int64_t ck::ConvDesc::* field :
       {&ck::ConvDesc::n, &ck::ConvDesc::c, &ck::ConvDesc::o, &ck::ConvDesc::kernel_h, &ck::ConvDesc::stride_w,
        &ck::ConvDesc::dilation_h, &ck::ConvDesc::groups, &ck::ConvDesc::out_w}) {
    ck::ConvDesc d = good_desc();
    d.*field = 0;
    refused(d);
  }
  ck::ConvDesc d = good_desc();
  d.pad_h = -1;
  refused(d);
  d = good_desc();
  d.groups = 3;  // divides neither 4 input nor 6 output channels
  refused(d);
  d = good_desc();
  d.n = std::int64_t{1} << 23;  // 2^23 * 4 * 8 * 8 = 2^31 elements: past the legacy API's int32 counts
  refused(d);
  // Running needs a handle, a plan and the tensors; null ones are no-ops to destroy.
  CHECK(ck::conv_run(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0, nullptr) == not_initialized);
  CHECK(ck::conv_run(nullptr, &sentinel, nullptr, nullptr, nullptr, nullptr, 0, nullptr) == null_pointer);
  CHECK(std::string(ck::conv_algorithm_name(nullptr)) == "no plan");
  ck::conv_destroy(nullptr);
  ck::dnn_destroy(nullptr);

  int count = 0;
  if (ck::device_count(count) != 0 || count == 0) {
    // No GPU: a handle is refused with cuDNN's status for it.
    void* handle = &sentinel;
    const int status = ck::dnn_create(handle);
    std::printf("no GPU: dnn_create gives %s\n", dnn_text(status).c_str());
    CHECK(status != 0);
    CHECK(handle == nullptr);
  }
}

TEST_CASE("cuda dnn: which conv launches go to cuDNN, and what it is told") {
  // Host memory stands in for device memory: conv_dnn only reads shapes and addresses.
  alignas(64) static float x[2 * 4 * 9 * 8];
  alignas(64) static float w[6 * 2 * 3 * 3];
  alignas(64) static float b[6];
  alignas(64) static float y[2 * 6 * 5 * 4];
  teeny::ConvArgs<float> args;
  args.x = teeny::TensorView<const float>(x, teeny::ConcreteShape{2, 4, 9, 8});
  args.weight = teeny::TensorView<const float>(w, teeny::ConcreteShape{6, 2, 3, 3});
  args.y = teeny::TensorView<float>(y, teeny::ConcreteShape{2, 6, 5, 4});
  args.window = {3, 3, 2, 2, 1, 1, 1, 1};
  args.groups = 2;
  auto c = teeny::cuda::conv_dnn(args, false);
  REQUIRE(c);
  CHECK(c->desc.type == ck::DnnType::f32);
  CHECK_FALSE(c->desc.tf32);
  CHECK((c->desc.n == 2 && c->desc.c == 4 && c->desc.h == 9 && c->desc.w == 8));
  CHECK((c->desc.o == 6 && c->desc.kernel_h == 3 && c->desc.kernel_w == 3 && c->desc.groups == 2));
  CHECK((c->desc.stride_h == 2 && c->desc.pad_w == 1 && c->desc.out_h == 5 && c->desc.out_w == 4));
  CHECK((c->x == x && c->filter == w && c->y == y));
  CHECK_FALSE(c->needs_finish);  // nothing folded in: cuDNN's output is the op's

  args.bias = teeny::TensorView<const float>(b, teeny::ConcreteShape{6});
  c = teeny::cuda::conv_dnn(args, true);
  REQUIRE(c);
  CHECK(c->desc.tf32);
  CHECK(c->needs_finish);  // the bias follows in teeny_conv_finish
  args.bias = {};
  args.epilogue = {true, teeny::UnaryFn::relu, {}};
  CHECK(teeny::cuda::conv_dnn(args, false)->needs_finish);

  // Refused: a pooled output (the pool reads activated values), a misaligned tensor.
  teeny::ConvArgs<float> pooled = args;
  pooled.pooled = true;
  CHECK_FALSE(teeny::cuda::conv_dnn(pooled, false));
  teeny::ConvArgs<float> shifted = args;
  shifted.x = teeny::TensorView<const float>(x + 1, teeny::ConcreteShape{2, 4, 9, 8});
  CHECK_FALSE(teeny::cuda::conv_dnn(shifted, false));
}

#endif  // TEENY_HAS_CUDA
