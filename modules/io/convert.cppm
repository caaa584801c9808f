// teeny.io:convert — copies elements from a file (little-endian) or from memory (native order),
// possibly unaligned, into native elements, converting the dtype on the way. Internal to teeny.io.
//
//   if (auto why = refuse_conversion(DType::f64, DType::f32, Policy::same_kind)) ...;  // none: allowed
//   check_values(src, DType::i64, DType::i8)   -> error if a value does not fit in i8
//   convert_into(src, DType::f64, dst, DType::f32);                                    // rounds
//
// Which conversions are allowed is a policy: reading a tensor accepts every conversion that
// keeps the value (up to rounding) — anything to a floating dtype, integers to integers when the
// values fit; loading parameters is stricter and keeps floating to floating and integer to
// integer. Floating to integer is never done: it would truncate, and NaN has no integer.
module teeny.io:convert;
import teeny.std;
import teeny.core;

namespace teeny::io_detail {

enum class Policy : std::uint8_t {
  value_preserving,  // tensor reads: any -> floating; integer/bool -> integer/bool when values fit
  same_kind,         // parameter loads: floating <-> floating; integer <-> integer when values fit; bool -> bool
};

/// Why `from` is not converted to `to` under `policy`, or nothing when it is.
std::optional<std::string> refuse_conversion(DType from, DType to, Policy policy) {
  if (from == to) return std::nullopt;
  if (is_floating(to)) {
    if (is_floating(from) || policy == Policy::value_preserving) return std::nullopt;
    return cat("an ", from, " value is not converted to the floating dtype ", to);
  }
  if (is_floating(from)) return cat("a floating ", from, " value is not converted to ", to, " (it would truncate)");
  if (policy == Policy::same_kind && (from == DType::boolean) != (to == DType::boolean)) {
    return cat("a ", from, " value is not converted to ", to);
  }
  return std::nullopt;  // integer/bool to integer/bool: each value is checked by check_values
}

/// The element at `p`, stored in byte order `order`.
template <class T>
T load_element(const std::byte* p, std::endian order) {
  if constexpr (std::same_as<T, bool>) {
    return std::to_integer<std::uint8_t>(*p) != 0;
  } else {
    std::array<std::byte, sizeof(T)> bytes;
    std::memcpy(bytes.data(), p, sizeof(T));
    if (order != std::endian::native) std::ranges::reverse(bytes);
    return std::bit_cast<T>(bytes);
  }
}

template <class T>
void store_native(std::byte* p, T value) {
  std::memcpy(p, &value, sizeof(T));
}

/// Whether an integer or bool value is representable in `to`.
template <class T>
constexpr bool fits(T value, DType to) {
  if constexpr (std::same_as<T, bool>) {
    return true;
  } else {
    static_assert(std::integral<T>);
    return visit_dtype(to, [&]<class To>(std::type_identity<To>) {
      if constexpr (std::same_as<To, bool>) {
        return value == 0 || value == 1;
      } else if constexpr (std::integral<To>) {
        return std::in_range<To>(value);
      } else {
        return true;
      }
    });
  }
}

/// Checks that every element of `src` (dtype `from`, byte order `order`) fits in `to`; needed
/// only for integer narrowing. The error says which element and value.
Result<void> check_values(std::span<const std::byte> src, DType from, DType to,
                          std::endian order = std::endian::little) {
  if (is_floating(from) || is_floating(to) || from == to) return ok();
  return visit_dtype(from, [&]<class From>(std::type_identity<From>) -> Result<void> {
    if constexpr (std::integral<From>) {
      const std::size_t n = src.size() / sizeof(From);
      for (std::size_t i = 0; i < n; ++i) {
        const From v = load_element<From>(src.data() + i * sizeof(From), order);
        if (!fits(v, to)) {
          return fail(Errc::out_of_range, "element ", i, " is ", v, ", which does not fit in ", to);
        }
      }
    }
    return ok();
  });
}

/// Converts the elements of `src` (dtype `from`, byte order `order`: little-endian in a file)
/// into native elements of `dst` (dtype `to`). Sizes must agree and the conversion must be allowed
/// (see refuse_conversion and check_values); either buffer may be unaligned.
void convert_into(std::span<const std::byte> src, DType from, std::span<std::byte> dst, DType to,
                  std::endian order = std::endian::little) {
  if (from == to && (order == std::endian::native || size_of(from) == 1)) {
    if (!src.empty()) std::memcpy(dst.data(), src.data(), src.size());
    return;
  }
  visit_dtype(from, [&]<class From>(std::type_identity<From>) {
    visit_dtype(to, [&]<class To>(std::type_identity<To>) {
      const std::size_t n = src.size() / sizeof(From);
      for (std::size_t i = 0; i < n; ++i) {
        const From v = load_element<From>(src.data() + i * sizeof(From), order);
        if constexpr (FloatElement<To> || !FloatElement<From>) {  // float -> integer is refused earlier
          store_native(dst.data() + i * sizeof(To), convert_element<To>(v));
        }
      }
    });
  });
}

}  // namespace teeny::io_detail
