// A program built against an installed teeny (tests/install/check.sh): builds a small graph, loads
// it on the CPU and checks its output against values computed by hand.
#include <cmath>
#include <cstdio>
#include <span>

import teeny;

int main() {
  teeny::GraphBuilder b;
  teeny::Value x = b.input("x", teeny::DType::f32, {2, 3});
  b.output("p", b.softmax(b.relu(x)));
  auto graph = std::move(b).build();
  if (!graph) return std::puts(graph.error().to_string().c_str()), 1;
  auto model = teeny::load_cpu(*graph, {});
  if (!model) return std::puts(model.error().to_string().c_str()), 1;
  const float in[] = {1, -2, 0, 0.5f, 0.5f, 3};
  const teeny::TensorRef ref{"x", teeny::DType::f32, {2, 3}, std::as_bytes(std::span(in))};
  if (auto ran = model->forward(std::span(&ref, 1)); !ran) return std::puts(ran.error().to_string().c_str()), 1;
  const auto* p = static_cast<const float*>(model->output("p")->data);
  // relu then softmax of each row, by hand: row 0 is softmax(1, 0, 0), row 1 softmax(0.5, 0.5, 3).
  const double e = std::exp(1.0);
  const double e3 = std::exp(2.5);
  const double want[] = {e / (e + 2), 1 / (e + 2), 1 / (e + 2), 1 / (2 + e3), 1 / (2 + e3), e3 / (2 + e3)};
  for (int i = 0; i < 6; ++i) {
    if (std::abs(p[i] - want[i]) > 1e-6) return std::printf("p[%d] = %g, want %g\n", i, p[i], want[i]), 1;
  }
  std::puts("installed teeny: ok");
  return 0;
}
