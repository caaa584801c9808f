// teeny.core:error — errors are values. teeny never throws: every fallible call returns
// Result<T>, which holds either a T or an Error whose message names what was wrong and where.
//
//   Result<int> parse(std::string_view s);
//   auto r = parse("12");
//   if (!r) return r.error().context("while reading 'x'");   // Error converts to any Result<U>
//   int v = *r;
module;
#include <cstdio>
export module teeny.core:error;
import teeny.std;

export namespace teeny {

/// What kind of thing went wrong; the message says what exactly.
enum class Errc : std::uint8_t {
  invalid_argument,  // a bad value passed by the caller
  shape_mismatch,    // shapes that do not fit together
  dtype_mismatch,    // dtypes that do not fit together
  unsupported,       // valid, but outside what this backend or lowering handles
  not_found,         // a named thing (input, node, key, file) is missing
  duplicate,         // a name used twice
  cycle,             // a graph or DAG with a cycle
  out_of_range,      // an index or size outside its bounds
  io,                // reading or writing a file failed
  parse,             // malformed file content
  out_of_memory,     // an allocation failed
  device,            // the accelerator reported an error
  internal,          // a broken invariant inside teeny (a bug: please report it)
};

constexpr std::string_view name(Errc code) {
  switch (code) {
    case Errc::invalid_argument: return "invalid argument";
    case Errc::shape_mismatch: return "shape mismatch";
    case Errc::dtype_mismatch: return "dtype mismatch";
    case Errc::unsupported: return "unsupported";
    case Errc::not_found: return "not found";
    case Errc::duplicate: return "duplicate";
    case Errc::cycle: return "cycle";
    case Errc::out_of_range: return "out of range";
    case Errc::io: return "i/o error";
    case Errc::parse: return "parse error";
    case Errc::out_of_memory: return "out of memory";
    case Errc::device: return "device error";
    case Errc::internal: return "internal error";
  }
  return "error";
}

/// An error: a code and a message naming the node, op, shapes and dtypes involved.
/// Context is prepended as the error travels outwards: "node 'fc1' (linear): input ...".
class Error {
 public:
  Error(Errc code, std::string message) : code_(code), message_(std::move(message)) {}

  Errc code() const { return code_; }
  const std::string& message() const { return message_; }

  /// Prepends `where` ("node 'fc1' (linear)", "file 'w.safetensors'") to the message.
  Error& context(std::string_view where) & {
    message_ = std::string(where) + ": " + message_;
    return *this;
  }
  Error&& context(std::string_view where) && { return std::move(context(where)); }

  /// "shape mismatch: node 'fc1' (linear): ..." — what a user sees.
  std::string to_string() const { return std::string(name(code_)) + ": " + message_; }

  friend bool operator==(const Error&, const Error&) = default;

 private:
  Errc code_;
  std::string message_;
};

namespace error_detail {
// Misuse of an empty Result (reading the value of an error) is a programming error in the
// caller, like dereferencing an empty optional; say what it was instead of reading garbage.
[[noreturn]] inline void bad_access(const Error* error) {
  std::fprintf(stderr, "teeny: value() called on a Result holding an error: %s\n",
               error != nullptr ? error->to_string().c_str() : "(no error)");
  std::abort();
}
}  // namespace error_detail

template <class T>
class Result;

template <class T>
inline constexpr bool is_result_v = false;
template <class T>
inline constexpr bool is_result_v<Result<T>> = true;

/// Either a T or an Error (an expected-like type: C++20 has no std::expected).
template <class T>
class [[nodiscard]] Result {
  static_assert(!std::is_reference_v<T> && !std::same_as<std::remove_cv_t<T>, Error>);

 public:
  using value_type = T;

  template <class U = T>
    requires std::constructible_from<T, U&&> && (!std::same_as<std::remove_cvref_t<U>, Result>) &&
             (!std::same_as<std::remove_cvref_t<U>, Error>)
  Result(U&& value) : state_(std::in_place_index<0>, std::forward<U>(value)) {}  // NOLINT: implicit by design
  Result(Error error) : state_(std::in_place_index<1>, std::move(error)) {}      // NOLINT: implicit by design

  bool has_value() const { return state_.index() == 0; }
  explicit operator bool() const { return has_value(); }

  T& value() & { return check(), *std::get_if<0>(&state_); }
  const T& value() const& { return check(), *std::get_if<0>(&state_); }
  T&& value() && { return check(), std::move(*std::get_if<0>(&state_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  /// The error; only meaningful when !has_value().
  const Error& error() const& {
    if (has_value()) error_detail::bad_access(nullptr);
    return *std::get_if<1>(&state_);
  }
  Error&& error() && {
    if (has_value()) error_detail::bad_access(nullptr);
    return std::move(*std::get_if<1>(&state_));
  }

  template <class U>
  T value_or(U&& fallback) const& {
    return has_value() ? *std::get_if<0>(&state_) : static_cast<T>(std::forward<U>(fallback));
  }

  /// Calls fn(value) -> Result<U> when there is a value; passes the error on otherwise.
  template <class F>
  auto and_then(F&& fn) && {
    using R = std::invoke_result_t<F, T&&>;
    static_assert(is_result_v<R>, "and_then's function must return a Result");
    if (!has_value()) return R(std::move(*this).error());
    return std::forward<F>(fn)(std::move(*this).value());
  }
  /// Calls fn(value) -> U when there is a value, giving Result<U>.
  template <class F>
  auto transform(F&& fn) && {
    using U = std::invoke_result_t<F, T&&>;
    if (!has_value()) return Result<U>(std::move(*this).error());
    return Result<U>(std::forward<F>(fn)(std::move(*this).value()));
  }
  /// Prepends context to the error, if any.
  Result&& context(std::string_view where) && {
    if (!has_value()) std::get_if<1>(&state_)->context(where);
    return std::move(*this);
  }

 private:
  void check() const {
    if (!has_value()) error_detail::bad_access(std::get_if<1>(&state_));
  }
  std::variant<T, Error> state_;
};

/// Success or an Error.
template <>
class [[nodiscard]] Result<void> {
 public:
  using value_type = void;
  Result() = default;
  Result(Error error) : error_(std::move(error)), failed_(true) {}  // NOLINT: implicit by design

  bool has_value() const { return !failed_; }
  explicit operator bool() const { return !failed_; }
  void value() const {
    if (failed_) error_detail::bad_access(&error_);
  }
  const Error& error() const& {
    if (!failed_) error_detail::bad_access(nullptr);
    return error_;
  }
  Error&& error() && {
    if (!failed_) error_detail::bad_access(nullptr);
    return std::move(error_);
  }
  Result&& context(std::string_view where) && {
    if (failed_) error_.context(where);
    return std::move(*this);
  }

 private:
  Error error_{Errc::internal, ""};
  bool failed_ = false;
};

/// Success for Result<void>: `return ok();`.
inline Result<void> ok() { return {}; }

// ---- message building -------------------------------------------------------------------------

/// Something that can be appended to an error message: strings, numbers, and any type with
/// a `to_string(x)` found by argument-dependent lookup (Shape, DType, ...).
template <class T>
concept Printable = std::convertible_to<const T&, std::string_view> || std::is_arithmetic_v<T> || requires(const T& x) {
  { to_string(x) } -> std::convertible_to<std::string>;
};

namespace error_detail {
// One part of a message, its type erased, so that one function (join) builds every message and a
// message's call site only fills an array: error paths stay small in code.
struct Piece {
  enum class Kind : std::uint8_t { text, signed_integer, unsigned_integer, real, character };
  Kind kind = Kind::text;
  std::string_view text{};
  union {
    long long i = 0;
    unsigned long long u;
    double d;
    char c;
  };
  explicit Piece(std::string_view s) : text(s) {}
  template <class T>
    requires std::is_arithmetic_v<T>
  explicit Piece(T v) {
    if constexpr (std::same_as<T, char>) {
      kind = Kind::character;
      c = v;
    } else if constexpr (std::is_floating_point_v<T>) {
      kind = Kind::real;
      d = static_cast<double>(v);
    } else if constexpr (std::is_signed_v<T>) {
      kind = Kind::signed_integer;
      i = v;
    } else {
      kind = Kind::unsigned_integer;
      u = v;
    }
  }
};

// A part as a Piece takes it: text, a number, or its to_string (a temporary that lives until the
// message is built).
template <class T>
decltype(auto) printable(const T& part) {
  if constexpr (std::convertible_to<const T&, std::string_view>) {
    return std::string_view(part);
  } else if constexpr (std::same_as<T, bool>) {
    return std::string_view(part ? "true" : "false");
  } else if constexpr (std::is_arithmetic_v<T>) {
    return part;
  } else {
    return to_string(part);
  }
}

std::string join(std::initializer_list<Piece> pieces) {
  std::string out;
  for (const Piece& p : pieces) {
    switch (p.kind) {
      case Piece::Kind::text: out += p.text; break;
      case Piece::Kind::character: out += p.c; break;
      case Piece::Kind::signed_integer: out += std::to_string(p.i); break;
      case Piece::Kind::unsigned_integer: out += std::to_string(p.u); break;
      case Piece::Kind::real: {
        char text[32];
        std::snprintf(text, sizeof text, "%.9g", p.d);
        out += text;
        break;
      }
    }
  }
  return out;
}
}  // namespace error_detail

/// Concatenates the parts into one string: cat("shape ", shape, " has ", n, " elements").
template <Printable... Parts>
std::string cat(const Parts&... parts) {
  return error_detail::join({error_detail::Piece(error_detail::printable(parts))...});
}

/// Builds an Error from message parts: fail(Errc::shape_mismatch, "expected ", a, ", got ", b).
template <Printable... Parts>
Error fail(Errc code, const Parts&... parts) {
  return Error(code, cat(parts...));
}

}  // namespace teeny
