// teeny.cpu:shape — CPU kernels of the data-movement ops.
module;
#include <cstring>
export module teeny.cpu:shape;
import teeny.core;
import teeny.ops;
import :context;

export namespace teeny {

Result<NoState> prepare_kernel(const reshape_op<float>& op, const CopyArgs<float>& args, CpuContext& cpu);
void run_kernel(const reshape_op<float>& op, const CopyArgs<float>& args, NoState& state, CpuContext& cpu);

}  // namespace teeny

namespace teeny {

Result<NoState> prepare_kernel(const reshape_op<float>&, const CopyArgs<float>&, CpuContext&) { return NoState{}; }

void run_kernel(const reshape_op<float>&, const CopyArgs<float>& args, NoState&, CpuContext&) {
  if (args.x.data != args.y.data) std::memcpy(args.y.data, args.x.data, sizeof(float) * args.y.numel());
}

}  // namespace teeny
