// The doctest runner for the whole suite. Test cases that need a GPU are in doctest's test suite
// "gpu" (TEST_CASE("..." * doctest::test_suite("gpu"))): without a GPU they are left out, so
// doctest counts them as skipped (its summary line), never as passed, and the reason is printed
// once. (The embedded build has no GPU code: its runner runs everything.)
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#if !TEENY_EMBEDDED
import teeny.cuda;
#endif

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
#if !TEENY_EMBEDDED
  if (teeny::cuda::device_count() == 0) {
    std::printf("[doctest] the GPU test cases (test suite \"gpu\") are skipped: %s\n",
                teeny::cuda::no_device_reason().c_str());
    context.addFilter("test-suite-exclude", "gpu");
  }
#endif
  return context.run();
}
