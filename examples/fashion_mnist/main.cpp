// fashion-mnist: teeny's main demo. Builds a Fashion-MNIST classifier graph with the builder and
// shows what teeny made of it: every node with its name, op, shape, dtype and parameters.
//
//   fashion-mnist [--model mlp|lenet]
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

import teeny;

#include "models.hpp"

namespace {
int usage(const char* program, const char* problem) {
  if (problem != nullptr) std::fprintf(stderr, "%s: %s\n", program, problem);
  std::fprintf(stderr, "usage: %s [--model mlp|lenet]\n", program);
  return 2;
}
}  // namespace

int main(int argc, char** argv) {
  std::string_view model = "mlp";
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      usage(argv[0], nullptr);
      return 0;
    }
    if (arg == "--model" && i + 1 < argc) {
      model = argv[++i];
    } else {
      return usage(argv[0], ("unknown argument '" + std::string(arg) + "'").c_str());
    }
  }
  if (model != "mlp" && model != "lenet") {
    return usage(argv[0], ("unknown model '" + std::string(model) + "' (choose mlp or lenet)").c_str());
  }

  auto graph = model == "mlp" ? fashion::mlp() : fashion::lenet();
  if (!graph) {
    std::fprintf(stderr, "error: %s\n", graph.error().to_string().c_str());
    return 1;
  }
  std::printf("Fashion-MNIST %s, built with teeny's GraphBuilder\n\n%s\n", std::string(model).c_str(),
              graph->summary().c_str());
  return 0;
}
