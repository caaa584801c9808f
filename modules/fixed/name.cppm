// teeny.fixed:name — a compile-time string usable as a template argument: the names of a typed
// model's layers, so that weight keys (`fc1.weight`) are part of the model's type.
//
//   template <Name N> struct Layer {};
//   Layer<"fc1"> a;
//   constexpr Name block = "layer1.0";
//   static_assert((block + ".conv1").view() == "layer1.0.conv1");
export module teeny.fixed:name;
import teeny.std;

export namespace teeny::fixed {

/// A string literal as a value of structural type (a template argument). N counts the final '\0'.
template <std::size_t N>
struct Name {
  char chars[N]{};

  constexpr Name() = default;
  constexpr Name(const char (&text)[N]) {  // NOLINT: implicit, so that Layer<"fc1"> reads naturally
    for (std::size_t i = 0; i < N; ++i) chars[i] = text[i];
  }
  constexpr std::string_view view() const { return {chars, N - 1}; }
  constexpr std::size_t size() const { return N - 1; }
  constexpr bool empty() const { return N == 1; }

  /// Concatenation, for names built from a prefix: `prefix + ".conv1"`.
  template <std::size_t M>
  constexpr Name<N + M - 1> operator+(const Name<M>& other) const {
    Name<N + M - 1> out;
    for (std::size_t i = 0; i + 1 < N; ++i) out.chars[i] = chars[i];
    for (std::size_t i = 0; i < M; ++i) out.chars[N - 1 + i] = other.chars[i];
    return out;
  }
  template <std::size_t M>
  constexpr Name<N + M - 1> operator+(const char (&other)[M]) const {
    return *this + Name<M>(other);
  }
};

template <std::size_t N>
Name(const char (&)[N]) -> Name<N>;

/// A constant string as a Name, N its size plus one: `name_from<kind.size() + 1>(kind)`.
template <std::size_t N>
constexpr Name<N> name_from(std::string_view text) {
  Name<N> out;
  for (std::size_t i = 0; i + 1 < N && i < text.size(); ++i) out.chars[i] = text[i];
  return out;
}

template <std::size_t N, std::size_t M>
constexpr bool operator==(const Name<N>& a, const Name<M>& b) {
  return a.view() == b.view();
}

}  // namespace teeny::fixed
