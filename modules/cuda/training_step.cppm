// teeny.cuda:training_step — a whole training step on the GPU (teeny::cuda): the forward, the loss,
// the backward and the optimizer's update queued as one unit and, with the model's graph replay
// on, captured once (per plan) as one CUDA graph and replayed, so that a step costs the host the
// copies of its inputs, targets and scalars and one graph launch.
//
//   auto model = teeny::cuda::load_cuda_for_training<bf16>(graph, {{"batch", 64}});
//   auto opt = teeny::cuda::AdamW<bf16>::create(*model, {.lr = 1e-3});
//   teeny::cuda::CrossEntropyLoss<bf16> loss;
//   model->set_graph_replay(true);
//   teeny::cuda::TrainingStep step(*model, loss, *opt, "logits");
//   for (...) {
//     auto value = step(inputs, labels);  // the loss; waits for the step
//     scheduler.step();                    // a new learning rate reaches the next replay
//   }
//
// Each step's values reach the captured kernels through device memory the host writes before
// the launch (the loss's targets and scalars, the optimizer's scalars, the run phase's seed and
// step), so a replay takes this step's, not the captured step's.
export module teeny.cuda:training_step;
import teeny.std;
import teeny.core;
import teeny.runtime;
import :device;
import :context;
import :launch;
import :cuda_model;
import :optimizer;
import :loss;

export namespace teeny::cuda {

/// A training step of `Model` (a CudaModelOf<T> lowered for training) with `Loss` on output
/// `output` (CrossEntropyLoss or MseLoss) and `Optimizer` (Sgd, Adam, AdamW), through
/// LoadedModel::training_step: zero_grad, forward, loss, backward and update in one call, the
/// gradients not accumulated across calls. With a GradScaler, the loss's gradient is scaled and
/// the update unscales it, skipping a step whose gradients overflowed (as the optimizers' step()
/// with a scaler). The model, loss, optimizer and scaler must outlive it.
template <class Model, class Loss, class Optimizer>
class TrainingStep {
 public:
  TrainingStep(Model& model, Loss& loss, Optimizer& optimizer, std::string output, GradScaler* scaler = nullptr)
      : model_(&model), loss_(&loss), optimizer_(&optimizer), output_(std::move(output)), scaler_(scaler) {}

  /// Runs one step on `inputs` (named as the graph's) against `targets` (the loss's: class
  /// indices for CrossEntropyLoss, values of the output's shape for MseLoss; host memory) and
  /// returns the loss of its forward (which waits for the step). The optimizer counts the step
  /// (Adam's bias corrections) only once it has run.
  template <class Target>
  Result<double> operator()(std::span<const TensorRef> inputs, std::span<const Target> targets) {
    Parts<Target> parts{*this, targets};
    if (auto ran = model_->training_step(inputs, parts); !ran) return std::move(ran).error().context("training step");
    auto value = loss_->read(*model_);
    if (!value) return std::move(value).error().context("training step");
    if (auto finished = optimizer_->finish(scaler_); !finished) {
      return std::move(finished).error().context("training step");
    }
    return *value;
  }

  const std::string& output() const { return output_; }

 private:
  // What Model::training_step calls back (TrainingStepParts), for one call's targets.
  template <class Target>
  struct Parts {
    TrainingStep& step;
    std::span<const Target> targets;

    Result<void> stage() {
      const double multiplier = step.scaler_ != nullptr ? step.scaler_->scale() : 1.0;
      if (auto staged = step.loss_->stage(*step.model_, step.output_, targets, multiplier); !staged) return staged;
      return step.optimizer_->stage(step.scaler_);
    }
    Result<void> queue_loss() { return step.loss_->queue(*step.model_); }
    Result<void> queue_update() { return step.optimizer_->queue(step.scaler_); }
    // This step's identity and the loss's buffers: what the captured launches point at besides
    // the model's and the optimizer's fixed memory.
    std::uint64_t capture_key() const { return (step.id_ << 32U) ^ step.loss_->generation(); }
  };

  // A number no other TrainingStep of this process has: a model captures a step again when
  // another TrainingStep runs it.
  static std::uint64_t next_id() {
    static std::atomic<std::uint64_t> count{0};
    return ++count;
  }

  Model* model_;
  Loss* loss_;
  Optimizer* optimizer_;
  std::string output_;
  GradScaler* scaler_;
  std::uint64_t id_ = next_id();
};

}  // namespace teeny::cuda
