// teeny.cuda:loss — losses of a model trained on the GPU (teeny::cuda): F.cross_entropy and
// F.mse_loss computed where the output is, in device memory, with the CPU losses' math
// (kernels/math/loss.hpp), their gradient written straight into the model's output gradient, and
// the loss returned. Sums are in double and in a fixed order: the same inputs give the same loss
// and gradients every run.
//
//   teeny::cuda::CrossEntropyLoss<bf16> loss({.label_smoothing = 0.1});  // buffers grow as needed
//   model->forward(in);
//   auto value = loss(*model, "logits", labels);   // labels: host int64 [N]; waits for the kernels
//   model->backward();
//   opt->step();
//
// With a GradScaler, pass its scale() as the gradient's multiplier. Targets come from host memory
// (checked there, then copied over); targets already in device memory are planned.
module;
#include "cuda/params.hpp"
#include "math/loss.hpp"
export module teeny.cuda:loss;
import teeny.std;
import teeny.core;
import teeny.model;
import teeny.runtime;
import :device;
import :context;
import :launch;
import :cuda_model;
import teeny.train;
import :optimizer;

namespace teeny::cuda::device_detail {

// Device memory of at least `bytes`, kept between calls and replaced only when it must grow:
// whether it was (replaced, or made).
inline Result<bool> reserve(DeviceBuffer& buffer, std::size_t bytes) {
  if (buffer.bytes() >= bytes && buffer.data() != nullptr) return false;
  auto grown = DeviceBuffer::allocate(std::max<std::size_t>(bytes, 1));
  if (!grown) return std::move(grown).error();
  buffer = std::move(*grown);
  return true;
}

// Output `name` of `model`'s last forward and its gradient, both contiguous (a padded output is
// refused): what a device loss reads and writes.
struct OutputAndGrad {
  TensorBinding value;
  TensorBinding grad;
};
template <class Model>
Result<OutputAndGrad> output_and_grad(Model& model, std::string_view loss, std::string_view name) {
  auto value = model.output(name);
  if (!value) return std::move(value).error().context(loss);
  auto grad = model.output_grad(name);
  if (!grad) return std::move(grad).error().context(loss);
  for (const TensorBinding* b : {&*value, &*grad}) {
    if (b->row_stride != 0 && b->row_stride != b->shape.last()) {
      return fail(Errc::unsupported, loss, ": output '", name, "' (", b->dtype, " ", b->shape, ") has padded rows (",
                  b->row_stride, " elements apart)");
    }
  }
  return OutputAndGrad{*value, *grad};
}

}  // namespace teeny::cuda::device_detail

export namespace teeny::cuda {

/// F.cross_entropy on a GPU model's logits (an output [N, C]) against class indices, with
/// PyTorch's options (reduction, ignore_index, label_smoothing): one thread a row, its terms
/// summed on the host in row order, as the CPU's cross_entropy sums them.
template <FloatElement T>
class CrossEntropyLoss {
 public:
  explicit CrossEntropyLoss(CrossEntropyOptions options = {}) : options_(options) {}

  /// The loss of output `name` of the model's last forward against `targets` (host memory, [N],
  /// each in [0, C) or options.ignore_index: checked first, an error names the sample), writing
  /// dL/d(logits) times `grad_multiplier` (a GradScaler's scale(), else 1) into the output's
  /// gradient for backward(). Waits for the kernels, to return the loss.
  Result<double> operator()(CudaModelOf<T>& model, std::string_view name, std::span<const std::int64_t> targets,
                            double grad_multiplier = 1.0) {
    if (auto staged = stage(model, name, targets, grad_multiplier); !staged) return std::move(staged).error();
    if (auto queued = queue(model); !queued) return std::move(queued).error();
    return read(model);
  }

  /// The loss in three parts, as a training step captured whole (TrainingStep) takes them:
  /// stage() checks the targets against output `name` of the model's current plan and copies them
  /// and the step's scalars to device memory; queue() queues the kernel, which reads them there
  /// (so a captured queue() replays with each step's targets); read() waits for it and sums.
  Result<void> stage(CudaModelOf<T>& model, std::string_view name, std::span<const std::int64_t> targets,
                     double grad_multiplier = 1.0) {
    staged_ = false;
    const double s = options_.label_smoothing;
    if (!(s >= 0.0 && s <= 1.0)) {
      return fail(Errc::invalid_argument, "cross_entropy: label_smoothing must be in [0, 1], got ", s);
    }
    auto io = device_detail::output_and_grad(model, "cross_entropy", name);
    if (!io) return std::move(io).error();
    const TensorBinding& logits = io->value;
    if (logits.dtype != dtype_of<T>) {
      return fail(Errc::dtype_mismatch, "cross_entropy: output '", name, "' is ", logits.dtype, ", not ", dtype_of<T>);
    }
    const TensorView<const std::int64_t> target_view(targets.data(),
                                                     ConcreteShape{static_cast<std::int64_t>(targets.size())});
    const TensorView<const T> logits_view(static_cast<const T*>(logits.data), logits.shape);
    if (auto checked = loss_detail::check_classes<T>("cross_entropy", cat("logits '", name, "'"), logits_view,
                                                     target_view, TensorView<T>{}, &options_.ignore_index);
        !checked) {
      return std::move(checked).error();
    }
    if (kernel_.entry == nullptr) {
      auto found = find_kernel_entry<T>("cross_entropy");
      if (!found) return std::move(found).error().context("cross_entropy");
      kernel_ = std::move(*found);
    }
    std::int64_t counted = 0;
    for (const std::int64_t t : targets) counted += t != options_.ignore_index ? 1 : 0;
    const double denominator = options_.reduction == Reduction::mean ? static_cast<double>(counted) : 1.0;
    name_ = name;
    rows_ = logits.shape[0];
    classes_ = logits.shape[1];
    step_host_ = {options_.ignore_index, s, denominator, grad_multiplier};
    CudaContext& cuda = model.backend();
    const auto n = static_cast<std::size_t>(rows_);
    for (auto [buffer, bytes] :
         {std::pair{&targets_, n * sizeof(std::int64_t)}, std::pair{&row_losses_, n * sizeof(double)},
          std::pair{&step_, sizeof(math::CrossEntropyStep)}}) {
      auto grown = device_detail::reserve(*buffer, bytes);
      if (!grown) return std::move(grown).error().context("cross_entropy");
      generation_ += *grown ? 1 : 0;
    }
    if (auto r = cuda.upload(targets_.data(), targets.data(), n * sizeof(std::int64_t)); !r) {
      return std::move(r).error().context("cross_entropy: the targets");
    }
    if (auto r = cuda.upload(step_.data(), &step_host_, sizeof step_host_); !r) {
      return std::move(r).error().context("cross_entropy: the step's scalars");
    }
    staged_ = true;
    return ok();
  }
  Result<void> queue(CudaModelOf<T>& model) {
    if (!staged_) return fail(Errc::invalid_argument, "cross_entropy: queue() needs a stage() first");
    if (rows_ == 0) return ok();
    auto io = device_detail::output_and_grad(model, "cross_entropy", name_);
    if (!io) return std::move(io).error();
    auto launched = launch_elements<cuda_kernels::CrossEntropyParamList<T>>(
        kernel_, rows_, model.backend().stream().handle(), static_cast<const T*>(io->value.data),
        static_cast<const std::int64_t*>(targets_.data()), static_cast<T*>(io->grad.data),
        static_cast<double*>(row_losses_.data()), rows_, classes_,
        static_cast<const math::CrossEntropyStep*>(step_.data()));
    if (!launched) return std::move(launched).error().context(cat("cross_entropy of output '", name_, "'"));
    return ok();
  }
  Result<double> read(CudaModelOf<T>& model) {
    if (!staged_) return fail(Errc::invalid_argument, "cross_entropy: read() needs a stage() first");
    if (rows_ == 0) return 0.0 / step_host_.denominator;  // as the CPU's: a mean over no sample is NaN
    const auto n = static_cast<std::size_t>(rows_);
    host_losses_.resize(n);
    if (auto r = model.backend().download(host_losses_.data(), row_losses_.data(), n * sizeof(double)); !r) {
      return std::move(r).error().context(cat("cross_entropy of output '", name_, "'"));
    }
    double total = 0;
    for (const double term : host_losses_) total += term;
    return total / step_host_.denominator;
  }

  const CrossEntropyOptions& options() const { return options_; }
  /// Counts the times stage() moved the device memory queue() reads (a bigger batch): a captured
  /// queue() is stale once it changes.
  std::uint64_t generation() const { return generation_; }

 private:
  CrossEntropyOptions options_;
  KernelEntry kernel_;
  DeviceBuffer targets_;
  DeviceBuffer row_losses_;
  DeviceBuffer step_;  // a math::CrossEntropyStep
  std::vector<double> host_losses_;
  // What stage() decided, for queue() and read().
  bool staged_ = false;
  std::string name_;
  std::int64_t rows_ = 0;
  std::int64_t classes_ = 0;
  math::CrossEntropyStep step_host_{};
  std::uint64_t generation_ = 0;
};

/// F.mse_loss on a GPU model's output against a target of its shape: each block of the kernel
/// sums its elements' squared errors in a fixed order, and the host sums the blocks' in order.
template <FloatElement T>
class MseLoss {
 public:
  explicit MseLoss(Reduction reduction = Reduction::mean) : reduction_(reduction) {}

  /// The loss of output `name` of the model's last forward against `target` (host memory, the
  /// output's shape, row-major), writing dL/d(output) times `grad_multiplier` into the output's
  /// gradient for backward(). Waits for the kernel, to return the loss.
  Result<double> operator()(CudaModelOf<T>& model, std::string_view name, std::span<const T> target,
                            double grad_multiplier = 1.0) {
    if (auto staged = stage(model, name, target, grad_multiplier); !staged) return std::move(staged).error();
    if (auto queued = queue(model); !queued) return std::move(queued).error();
    return read(model);
  }

  /// The loss in three parts, as CrossEntropyLoss's: stage() checks `target` and copies it and the
  /// gradient's multiplier to device memory, queue() queues the kernel, read() waits and sums.
  Result<void> stage(CudaModelOf<T>& model, std::string_view name, std::span<const T> target,
                     double grad_multiplier = 1.0) {
    staged_ = false;
    auto io = device_detail::output_and_grad(model, "mse_loss", name);
    if (!io) return std::move(io).error();
    const TensorBinding& input = io->value;
    if (input.dtype != dtype_of<T>) {
      return fail(Errc::dtype_mismatch, "mse_loss: output '", name, "' is ", input.dtype, ", not ", dtype_of<T>);
    }
    const std::int64_t n = input.shape.numel();
    if (static_cast<std::int64_t>(target.size()) != n) {
      return fail(Errc::shape_mismatch, "mse_loss: output '", name, "' ", input.shape, " has ", n,
                  " elements, but the target has ", target.size());
    }
    if (kernel_.entry == nullptr) {
      auto found = find_kernel_entry<T>("squared_error");
      if (!found) return std::move(found).error().context("mse_loss");
      kernel_ = std::move(*found);
    }
    name_ = name;
    n_ = n;
    scale_ = reduction_ == Reduction::mean ? 1.0 / static_cast<double>(n) : 1.0;
    multiplier_host_ = scale_ * grad_multiplier;
    blocks_ = element_blocks(n, kMaxBlocks);
    const auto bytes = static_cast<std::size_t>(n) * sizeof(T);
    for (auto [buffer, size] : {std::pair{&target_, bytes}, std::pair{&partials_, blocks_ * sizeof(double)},
                                std::pair{&multiplier_, sizeof(double)}}) {
      auto grown = device_detail::reserve(*buffer, size);
      if (!grown) return std::move(grown).error().context("mse_loss");
      generation_ += *grown ? 1 : 0;
    }
    CudaContext& cuda = model.backend();
    if (auto r = cuda.upload(target_.data(), target.data(), bytes); !r) {
      return std::move(r).error().context("mse_loss: the target");
    }
    if (auto r = cuda.upload(multiplier_.data(), &multiplier_host_, sizeof multiplier_host_); !r) {
      return std::move(r).error().context("mse_loss: the gradient's multiplier");
    }
    staged_ = true;
    return ok();
  }
  Result<void> queue(CudaModelOf<T>& model) {
    if (!staged_) return fail(Errc::invalid_argument, "mse_loss: queue() needs a stage() first");
    if (n_ == 0) return ok();
    auto io = device_detail::output_and_grad(model, "mse_loss", name_);
    if (!io) return std::move(io).error();
    auto launched = launch_values<cuda_kernels::SquaredErrorParamList<T>>(
        kernel_, blocks_, cat(n_, " elements"), model.backend().stream().handle(),
        static_cast<const T*>(io->value.data), static_cast<const T*>(target_.data()), static_cast<T*>(io->grad.data),
        static_cast<double*>(partials_.data()), n_, static_cast<const double*>(multiplier_.data()));
    if (!launched) return std::move(launched).error().context(cat("mse_loss of output '", name_, "'"));
    return ok();
  }
  Result<double> read(CudaModelOf<T>& model) {
    if (!staged_) return fail(Errc::invalid_argument, "mse_loss: read() needs a stage() first");
    // As the CPU's (and PyTorch's): a mean over no element is NaN.
    if (n_ == 0) return reduction_ == Reduction::mean ? std::numeric_limits<double>::quiet_NaN() : 0.0;
    host_partials_.resize(blocks_);
    if (auto r = model.backend().download(host_partials_.data(), partials_.data(), blocks_ * sizeof(double)); !r) {
      return std::move(r).error().context(cat("mse_loss of output '", name_, "'"));
    }
    double total = 0;
    for (const double partial : host_partials_) total += partial;
    return total * scale_;
  }

  /// As CrossEntropyLoss::generation: counts the moves of the memory queue() reads.
  std::uint64_t generation() const { return generation_; }

 private:
  static constexpr std::int64_t kMaxBlocks = 1024;  // the partial sums the host adds up
  Reduction reduction_;
  KernelEntry kernel_;
  DeviceBuffer target_;
  DeviceBuffer partials_;
  DeviceBuffer multiplier_;  // a double: the mean's scale times the caller's multiplier
  std::vector<double> host_partials_;
  // What stage() decided, for queue() and read().
  bool staged_ = false;
  std::string name_;
  std::int64_t n_ = 0;
  std::uint32_t blocks_ = 1;
  double scale_ = 1;
  double multiplier_host_ = 1;
  std::uint64_t generation_ = 0;
};

}  // namespace teeny::cuda
