// teeny.train data: the batch sampler (every index once per epoch, seeded and pinned orders,
// partial and dropped last batches) and gather_rows, allocation-free.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <vector>

import teeny.core;
import teeny.train;

#include "support/allocation_counter.hpp"

using teeny::BatchSampler;
using teeny::Errc;
using teeny::TensorView;

namespace {

bool contains(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

std::vector<std::vector<std::int64_t>> batches_of(const BatchSampler& s) {
  std::vector<std::vector<std::int64_t>> out;
  for (std::span<const std::int64_t> b : s.batches()) out.emplace_back(b.begin(), b.end());
  return out;
}

}  // namespace

TEST_CASE("BatchSampler: every index exactly once per epoch, in batches, a new order each epoch") {
  auto s = BatchSampler::create(103, 10, 7);
  REQUIRE(s);
  CHECK(s->n_batches() == 11);
  std::vector<std::int64_t> previous;
  for (std::uint64_t epoch = 0; epoch < 4; ++epoch) {
    s->set_epoch(epoch);
    const auto batches = batches_of(*s);
    REQUIRE(batches.size() == 11);
    std::vector<std::int64_t> seen;
    for (std::size_t b = 0; b < batches.size(); ++b) {
      CHECK(batches[b].size() == (b < 10 ? 10u : 3u));  // the last partial batch is kept
      seen.insert(seen.end(), batches[b].begin(), batches[b].end());
      auto same = s->batch(static_cast<std::int64_t>(b));
      REQUIRE(same);
      CHECK(std::ranges::equal(*same, batches[b]));
    }
    CHECK(seen != previous);
    previous = seen;
    std::ranges::sort(seen);
    std::vector<std::int64_t> all(103);
    std::iota(all.begin(), all.end(), 0);
    CHECK(seen == all);
  }
  auto beyond = s->batch(11);
  REQUIRE_FALSE(beyond);
  CHECK(beyond.error().code() == Errc::out_of_range);
}

TEST_CASE("BatchSampler: seeded and pinned (its own xoshiro256** generator, not the standard library's)") {
  auto a = BatchSampler::create(10, 4, 42);
  auto b = BatchSampler::create(10, 4, 42);
  auto c = BatchSampler::create(10, 4, 43);
  REQUIRE((a && b && c));
  // From an independent Python implementation of the documented algorithm.
  CHECK(std::ranges::equal(a->order(), std::vector<std::int64_t>{8, 3, 0, 2, 4, 5, 1, 6, 9, 7}));
  a->next_epoch();
  CHECK(std::ranges::equal(a->order(), std::vector<std::int64_t>{9, 7, 3, 2, 8, 0, 5, 6, 1, 4}));
  auto d = BatchSampler::create(7, 3, 0);
  REQUIRE(d);
  d->set_epoch(5);
  CHECK(std::ranges::equal(d->order(), std::vector<std::int64_t>{2, 3, 0, 4, 6, 1, 5}));
  // An epoch's order depends only on (seed, epoch).
  b->set_epoch(3);
  b->set_epoch(1);
  CHECK(std::ranges::equal(a->order(), b->order()));
  CHECK(batches_of(*a) == batches_of(*b));
  c->set_epoch(1);
  CHECK(!std::ranges::equal(a->order(), c->order()));
  teeny::Xoshiro256 rng(1);
  CHECK(rng.next() == 0xb3f2af6d0fc710c5ULL);
  CHECK(rng.next() == 0x853b559647364ceaULL);
}

TEST_CASE("BatchSampler: drop_last, no shuffle, edge sizes and bad arguments") {
  auto dropped = BatchSampler::create(10, 4, 1, true, true);
  REQUIRE(dropped);
  CHECK(dropped->n_batches() == 2);
  const auto batches = batches_of(*dropped);
  REQUIRE(batches.size() == 2);
  CHECK((batches[0].size() == 4 && batches[1].size() == 4));
  CHECK_FALSE(dropped->batch(2));

  auto ordered = BatchSampler::create(5, 2, 1, false);
  REQUIRE(ordered);
  ordered->next_epoch();
  CHECK(batches_of(*ordered) == std::vector<std::vector<std::int64_t>>{{0, 1}, {2, 3}, {4}});

  auto exact = BatchSampler::create(8, 4, 1, true, true);
  REQUIRE(exact);
  CHECK(exact->n_batches() == 2);
  auto empty = BatchSampler::create(0, 4, 1);
  REQUIRE(empty);
  CHECK(empty->n_batches() == 0);
  CHECK(batches_of(*empty).empty());
  auto big = BatchSampler::create(3, 8, 1, true, true);
  REQUIRE(big);
  CHECK(batches_of(*big).empty());

  auto zero = BatchSampler::create(10, 0, 1);
  REQUIRE_FALSE(zero);
  CHECK(contains(zero.error().message(), "BatchSampler: batch_size must be >= 1, got 0"));
  auto negative = BatchSampler::create(-1, 2, 1);
  REQUIRE_FALSE(negative);
  CHECK(negative.error().code() == Errc::invalid_argument);
}

TEST_CASE("gather_rows copies the chosen samples and their labels into a batch buffer") {
  std::vector<float> images(5 * 2 * 3);
  std::iota(images.begin(), images.end(), 0.0f);
  const std::vector<std::int64_t> labels{10, 11, 12, 13, 14};
  std::vector<float> x(4 * 2 * 3, -1.0f);
  std::vector<std::int64_t> y(4, -1);
  const std::vector<std::int64_t> batch{4, 0, 2};
  const TensorView<const float> source(images.data(), {5, 2, 3});
  REQUIRE(teeny::gather_rows<float>(source, batch, {x.data(), {4, 2, 3}}));
  REQUIRE(teeny::gather_rows<std::int64_t>({labels.data(), {5}}, batch, {y.data(), {4}}));
  for (std::size_t k = 0; k < 3; ++k) {
    for (std::size_t e = 0; e < 6; ++e) CHECK(x[k * 6 + e] == images[static_cast<std::size_t>(batch[k]) * 6 + e]);
  }
  CHECK(std::all_of(x.begin() + 18, x.end(), [](float v) { return v == -1.0f; }));  // rows past the batch untouched
  CHECK(y == std::vector<std::int64_t>{14, 10, 12, -1});

  const std::vector<std::int64_t> bad{1, 5};
  auto out = teeny::gather_rows<float>(source, bad, {x.data(), {4, 2, 3}});
  REQUIRE_FALSE(out);
  CHECK(out.error().code() == Errc::out_of_range);
  CHECK(contains(out.error().message(), "gather_rows: index 5 (position 1 of the batch) is out of range [0, 5)"));
  CHECK(x[0] == images[24]);  // nothing copied
  auto small = teeny::gather_rows<float>(source, batch, {x.data(), {2, 2, 3}});
  REQUIRE_FALSE(small);
  CHECK(small.error().code() == Errc::shape_mismatch);
  auto dims = teeny::gather_rows<float>(source, batch, {x.data(), {4, 3, 2}});
  REQUIRE_FALSE(dims);
  CHECK(contains(dims.error().message(),
                 "source [5, 2, 3] and destination [4, 3, 2] must have the same dims after the first"));
}

TEST_CASE("fetching batches allocates nothing after creation") {
  auto s = BatchSampler::create(1000, 32, 3);
  REQUIRE(s);
  std::vector<float> data(1000 * 8, 1.0f);
  std::vector<float> batch(32 * 8);
  const std::size_t before = test_support::allocation_count();
  std::int64_t rows = 0;
  bool all_ok = true;
  for (std::uint64_t epoch = 0; epoch < 3; ++epoch) {
    s->set_epoch(epoch);
    for (std::span<const std::int64_t> b : s->batches()) {
      all_ok = all_ok && teeny::gather_rows<float>({data.data(), {1000, 8}}, b, {batch.data(), {32, 8}}).has_value();
      rows += static_cast<std::int64_t>(b.size());
    }
  }
  CHECK(test_support::allocation_count() - before == 0);
  CHECK(all_ok);
  CHECK(rows == 3000);
}
