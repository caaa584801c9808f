// teeny.train:data — mini-batches: a seeded sampler that reshuffles the sample indices every epoch,
// and gather_rows, which copies the chosen samples into a preallocated batch buffer. Neither
// allocates after creation.
//
//   auto sampler = BatchSampler::create(train.n, 64, /*seed=*/42);          // Result<BatchSampler>
//   for (std::uint64_t epoch = 0; epoch < 10; ++epoch) {
//     sampler->set_epoch(epoch);
//     for (std::span<const std::int64_t> batch : sampler->batches()) {
//       auto x = gather_rows<float>(images, batch, x_batch);                 // rows of [N, 1, 28, 28]
//       auto y = gather_rows<std::int64_t>(labels, batch, y_batch);          // rows of [N]
//     }
//   }
//
// Shuffling is Fisher-Yates driven by teeny's own generator (xoshiro256** 1.0 seeded through
// splitmix64, see Xoshiro256), so an epoch's order depends only on (seed, epoch), never on the
// standard library or on the epochs before it.
export module teeny.train:data;
import teeny.std;
import teeny.core;

export namespace teeny {

/// splitmix64's output function (Steele, Lea, Flood 2014): a bijective 64-bit mix.
constexpr std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// xoshiro256** 1.0 (Blackman and Vigna, https://prng.di.unimi.it), its four words of state the
/// first four outputs of splitmix64 started at `seed`.
class Xoshiro256 {
 public:
  explicit constexpr Xoshiro256(std::uint64_t seed) {
    for (std::uint64_t& word : s_) {
      seed += 0x9e3779b97f4a7c15ULL;
      word = mix64(seed);
    }
  }
  constexpr std::uint64_t next() {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  /// Uniform in [0, n) for n > 0, without bias (Lemire's multiply-and-reject, 2019).
  constexpr std::uint64_t below(std::uint64_t n) {
    unsigned __int128 m = static_cast<unsigned __int128>(next()) * n;
    auto low = static_cast<std::uint64_t>(m);
    if (low < n) {
      const std::uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(next()) * n;
        low = static_cast<std::uint64_t>(m);
      }
    }
    return static_cast<std::uint64_t>(m >> 64);
  }

 private:
  static constexpr std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t s_[4] = {};
};

/// Consecutive spans of `size` indices (the last one shorter) over [begin, end): what std::views::chunk
/// (C++23) gives. Not range-v3's views::chunk: its iterator and sentinel do not compare in a module's
/// importer with clang 19.
class BatchRange {
 public:
  class iterator {
   public:
    using value_type = std::span<const std::int64_t>;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    iterator(const std::int64_t* at, const std::int64_t* end, std::int64_t size) : at_(at), end_(end), size_(size) {}
    value_type operator*() const { return {at_, step()}; }
    iterator& operator++() {
      at_ += step();
      return *this;
    }
    iterator operator++(int) {
      iterator before = *this;
      ++*this;
      return before;
    }
    friend bool operator==(const iterator& a, const iterator& b) { return a.at_ == b.at_; }

   private:
    std::size_t step() const { return static_cast<std::size_t>(std::min<std::ptrdiff_t>(size_, end_ - at_)); }
    const std::int64_t* at_ = nullptr;
    const std::int64_t* end_ = nullptr;
    std::int64_t size_ = 1;
  };

  BatchRange(const std::int64_t* begin, const std::int64_t* end, std::int64_t size)
      : begin_(begin), end_(end), size_(size) {}
  iterator begin() const { return {begin_, end_, size_}; }
  iterator end() const { return {end_, end_, size_}; }
  std::size_t size() const { return static_cast<std::size_t>((end_ - begin_ + size_ - 1) / size_); }
  bool empty() const { return begin_ == end_; }

 private:
  const std::int64_t* begin_;
  const std::int64_t* end_;
  std::int64_t size_;
};
static_assert(std::ranges::forward_range<BatchRange> && std::ranges::sized_range<BatchRange>);

/// Splits 0 .. n_samples-1 into batches of batch_size, in a new random order every epoch (or in
/// order, without shuffle). The last batch is smaller when batch_size does not divide n_samples,
/// or dropped with drop_last (PyTorch's DataLoader(shuffle, drop_last) over a RandomSampler).
/// Epoch e's order is a Fisher-Yates shuffle of 0 .. n-1 by Xoshiro256(mix64(seed ^ mix64(e))).
class BatchSampler {
 public:
  static Result<BatchSampler> create(std::int64_t n_samples, std::int64_t batch_size, std::uint64_t seed,
                                     bool shuffle = true, bool drop_last = false) {
    if (n_samples < 0) return fail(Errc::invalid_argument, "BatchSampler: n_samples must be >= 0, got ", n_samples);
    if (batch_size < 1) return fail(Errc::invalid_argument, "BatchSampler: batch_size must be >= 1, got ", batch_size);
    BatchSampler s;
    s.order_.resize(static_cast<std::size_t>(n_samples));
    s.batch_size_ = batch_size;
    s.seed_ = seed;
    s.shuffle_ = shuffle;
    s.drop_last_ = drop_last;
    s.set_epoch(0);
    return s;
  }

  std::int64_t n_samples() const { return static_cast<std::int64_t>(order_.size()); }
  std::int64_t batch_size() const { return batch_size_; }
  /// Batches per epoch.
  std::int64_t n_batches() const {
    return drop_last_ ? n_samples() / batch_size_ : (n_samples() + batch_size_ - 1) / batch_size_;
  }
  std::uint64_t epoch() const { return epoch_; }

  /// Makes `epoch`'s order current.
  void set_epoch(std::uint64_t epoch) {
    epoch_ = epoch;
    std::iota(order_.begin(), order_.end(), std::int64_t{0});
    if (!shuffle_) return;
    Xoshiro256 rng(mix64(seed_ ^ mix64(epoch)));
    for (std::size_t i = order_.size(); i > 1; --i) {
      const std::size_t j = rng.below(i);
      std::swap(order_[i - 1], order_[j]);
    }
  }
  void next_epoch() { set_epoch(epoch_ + 1); }

  /// The current epoch's order of all samples (including those drop_last leaves out).
  std::span<const std::int64_t> order() const { return order_; }
  /// Batch b of the current epoch, for b in [0, n_batches()).
  Result<std::span<const std::int64_t>> batch(std::int64_t b) const {
    if (b < 0 || b >= n_batches()) {
      return fail(Errc::out_of_range, "BatchSampler: batch ", b, " of an epoch of ", n_batches(), " batches");
    }
    const std::int64_t begin = b * batch_size_;
    return std::span<const std::int64_t>(order_).subspan(
        static_cast<std::size_t>(begin), static_cast<std::size_t>(std::min(batch_size_, n_samples() - begin)));
  }
  /// The current epoch's batches, a forward range of std::span<const std::int64_t> (valid until set_epoch).
  BatchRange batches() const {
    const std::int64_t used = drop_last_ ? n_batches() * batch_size_ : n_samples();
    return BatchRange(order_.data(), order_.data() + used, batch_size_);
  }

 private:
  BatchSampler() = default;
  std::vector<std::int64_t> order_;
  std::int64_t batch_size_ = 1;
  std::uint64_t seed_ = 0;
  std::uint64_t epoch_ = 0;
  bool shuffle_ = true;
  bool drop_last_ = false;
};

/// Copies rows indices[k] of `source` (n rows of row_bytes each) to row k of `destination`, one
/// memcpy per row. destination must hold at least indices.size() rows; rows after them are left
/// as they are. Every index is checked before anything is copied.
inline Result<void> gather_rows(std::span<const std::byte> source, std::size_t row_bytes,
                                std::span<const std::int64_t> indices, std::span<std::byte> destination) {
  if (row_bytes == 0 || source.size() % row_bytes != 0) {
    return fail(Errc::invalid_argument, "gather_rows: a source of ", source.size(), " bytes is not made of rows of ",
                row_bytes, " bytes");
  }
  const auto rows = static_cast<std::int64_t>(source.size() / row_bytes);
  if (destination.size() / row_bytes < indices.size()) {
    return fail(Errc::shape_mismatch, "gather_rows: the destination holds ", destination.size() / row_bytes,
                " rows of ", row_bytes, " bytes, fewer than the ", indices.size(), " indices");
  }
  for (std::size_t k = 0; k < indices.size(); ++k) {
    if (indices[k] < 0 || indices[k] >= rows) {
      return fail(Errc::out_of_range, "gather_rows: index ", indices[k], " (position ", k,
                  " of the batch) is out of range [0, ", rows, ")");
    }
  }
  for (std::size_t k = 0; k < indices.size(); ++k) {
    std::memcpy(destination.data() + k * row_bytes, source.data() + static_cast<std::size_t>(indices[k]) * row_bytes,
                row_bytes);
  }
  return ok();
}

/// Copies the samples source[indices[k], ...] to destination[k, ...]: both contiguous, of the same
/// dtype and the same dims after the first; destination has at least indices.size() rows.
template <Element T>
Result<void> gather_rows(TensorView<const T> source, std::span<const std::int64_t> indices, TensorView<T> destination) {
  if (source.rank() < 1 || destination.rank() != source.rank()) {
    return fail(Errc::shape_mismatch, "gather_rows: source ", source.shape, " and destination ", destination.shape,
                " must be [N, ...] and [B, ...] with the same dims after the first");
  }
  for (std::size_t d = 1; d < source.rank(); ++d) {
    if (source.shape[d] != destination.shape[d]) {
      return fail(Errc::shape_mismatch, "gather_rows: source ", source.shape, " and destination ", destination.shape,
                  " must have the same dims after the first");
    }
  }
  if ((source.data == nullptr && source.numel() > 0) || (destination.data == nullptr && destination.numel() > 0)) {
    return fail(Errc::invalid_argument, "gather_rows: source ", source.shape, " or destination ", destination.shape,
                " has no data (null pointer)");
  }
  if (!source.is_contiguous() || !destination.is_contiguous()) {
    return fail(Errc::unsupported, "gather_rows: source ", source.shape, " and destination ", destination.shape,
                " must be contiguous");
  }
  std::size_t row_elements = 1;
  for (std::size_t d = 1; d < source.rank(); ++d) row_elements *= static_cast<std::size_t>(source.shape[d]);
  if (row_elements == 0) {
    if (destination.shape[0] < static_cast<std::int64_t>(indices.size())) {
      return fail(Errc::shape_mismatch, "gather_rows: destination ", destination.shape, " has fewer than ",
                  indices.size(), " rows");
    }
    for (std::size_t k = 0; k < indices.size(); ++k) {
      if (indices[k] < 0 || indices[k] >= source.shape[0]) {
        return fail(Errc::out_of_range, "gather_rows: index ", indices[k], " (position ", k,
                    " of the batch) is out of range [0, ", source.shape[0], ")");
      }
    }
    return ok();
  }
  return gather_rows(std::as_bytes(source.span()), row_elements * sizeof(T), indices,
                     std::as_writable_bytes(destination.span()));
}

}  // namespace teeny
