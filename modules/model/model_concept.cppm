// teeny.model:model_concept — a compiled, runnable model: inputs in, Result<outputs> out.
//
// Satisfied by the loaded run-time model (named tensors in and out) and by the static,
// compile-time-typed model of embedded builds (typed tensors in and out).
export module teeny.model:model_concept;
import teeny.std;
import teeny.core;

export namespace teeny {

template <class M>
concept Model = requires(M& model, typename M::Input input) {
  typename M::Input;
  typename M::Output;
  { model.forward(std::move(input)) } -> std::same_as<Result<typename M::Output>>;
};

}  // namespace teeny
