// teeny.model:launch — what a backend hands an op: launch geometry and the tensors it binds.
//
// The seed passed raw pointers positionally. Here a plan binds each tensor as a TensorBinding
// (pointer + dtype + concrete shape + row stride; teeny.core:tensor), and the op turns the
// bindings into its own typed argument struct (see :args), checking dtypes once, at load.
export module teeny.model:launch;
import teeny.std;
import teeny.core;

export namespace teeny {

/// A launch extent (CUDA's dim3): threads per block or blocks per grid.
struct Dim3 {
  std::uint32_t x = 1;
  std::uint32_t y = 1;
  std::uint32_t z = 1;
  friend constexpr bool operator==(const Dim3&, const Dim3&) = default;
  constexpr std::uint64_t volume() const { return std::uint64_t{x} * y * z; }
};

inline std::string to_string(const Dim3& d) {
  return "(" + std::to_string(d.x) + ", " + std::to_string(d.y) + ", " + std::to_string(d.z) + ")";
}

/// What a forward runs for (the seed's training flag), as a backend holds it: a model lowered for
/// training runs its BatchNorms on batch statistics and its dropouts in the training phase, and
/// as at inference in the eval phase. `seed` and `step` (training forwards run so far) drive
/// dropout's masks. Inference models stay in the eval phase.
struct RunPhase {
  bool training = false;
  std::uint64_t seed = 0;
  std::uint64_t step = 0;
};

/// Where a prepared kernel will run, for a backend that wants to know at load rather than per
/// forward (the CUDA backend packs each launch's parameters and checks its geometry once): the DAG
/// node, which of the op's launches, and that launch's geometry (block, grid_for_launch).
struct LaunchSite {
  std::string_view node;
  std::size_t launch = 0;
  Dim3 grid;
  Dim3 block;
};

/// Everything a forward launch reads and writes (the seed's pack_args inputs).
struct OpBindings {
  std::span<const TensorBinding> inputs;  // activations, in operand-slot order
  std::span<const TensorBinding> params;  // parameter buffers, in param_names order
  TensorBinding output;
};

#if TEENY_TRAINING
/// Everything a backward launch reads and writes (the seed's pack_backward_args inputs).
struct BackwardBindings {
  std::span<const TensorBinding> inputs;       // forward activations (from the cache)
  std::span<const TensorBinding> params;       // forward parameters
  TensorBinding output;                        // forward output (from the cache)
  TensorBinding grad_output;                   // dL/dy from the consumers
  std::span<const TensorBinding> grad_inputs;  // dL/dx, one per activation input
  std::span<const TensorBinding> grad_params;  // dL/dw, one per parameter
};
#endif

}  // namespace teeny
