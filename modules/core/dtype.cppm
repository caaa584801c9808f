// teeny.core:dtype — the 13 element types of a tensor, their storage types and names.
//
//   DType d = dtype_of<float>;                 // DType::f32
//   name(DType::bf16) == "bf16";  size_of(DType::i64) == 8;
//   parse_dtype("BF16") == DType::bf16;          // safetensors spelling accepted too
module;
#include "math/half.hpp"
export module teeny.core:dtype;
import teeny.std;

export namespace teeny {

using teeny::bf16;
using teeny::f16;

/// Element type of a tensor. The order is stable (it indexes tables below). `count` is not a dtype
/// but how many there are: it stays last, so it cannot go stale, and every table indexed by a
/// DType checks its size against it.
enum class DType : std::uint8_t { boolean, i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64, count };
inline constexpr std::size_t dtype_count = static_cast<std::size_t>(DType::count);

/// Every dtype, in order.
inline constexpr auto all_dtypes = [] {
  std::array<DType, dtype_count> all{};
  for (std::size_t i = 0; i < dtype_count; ++i) all[i] = static_cast<DType>(i);
  return all;
}();

namespace dtype_detail {
struct Info {
  std::string_view name;         // teeny's spelling
  std::string_view safetensors;  // the safetensors header spelling
  std::uint8_t bytes;
  bool floating;
  bool is_signed;
};
inline constexpr auto infos = std::to_array<Info>({
    {"bool", "BOOL", 1, false, false},
    {"i8", "I8", 1, false, true},
    {"i16", "I16", 2, false, true},
    {"i32", "I32", 4, false, true},
    {"i64", "I64", 8, false, true},
    {"u8", "U8", 1, false, false},
    {"u16", "U16", 2, false, false},
    {"u32", "U32", 4, false, false},
    {"u64", "U64", 8, false, false},
    {"f16", "F16", 2, true, true},
    {"bf16", "BF16", 2, true, true},
    {"f32", "F32", 4, true, true},
    {"f64", "F64", 8, true, true},
});
static_assert(infos.size() == dtype_count, "every DType needs a row in dtype_detail::infos");
constexpr const Info& info(DType d) { return infos[static_cast<std::size_t>(d)]; }
}  // namespace dtype_detail

constexpr std::string_view name(DType d) { return dtype_detail::info(d).name; }
/// The spelling of `d` in a safetensors header ("F32", "BF16", ...).
constexpr std::string_view safetensors_name(DType d) { return dtype_detail::info(d).safetensors; }
constexpr std::size_t size_of(DType d) { return dtype_detail::info(d).bytes; }
constexpr bool is_floating(DType d) { return dtype_detail::info(d).floating; }
constexpr bool is_integral(DType d) { return !is_floating(d) && d != DType::boolean; }
constexpr bool is_signed(DType d) { return dtype_detail::info(d).is_signed; }

/// Parses teeny's names ("f32"), safetensors' ("F32") and PyTorch's ("float32", "bfloat16", "int64").
constexpr std::optional<DType> parse_dtype(std::string_view text) {
  for (DType d : all_dtypes) {
    if (text == name(d) || text == safetensors_name(d)) return d;
  }
  constexpr std::array<std::pair<std::string_view, DType>, 11> torch_names{{
      {"float32", DType::f32},
      {"float", DType::f32},
      {"float64", DType::f64},
      {"double", DType::f64},
      {"float16", DType::f16},
      {"half", DType::f16},
      {"bfloat16", DType::bf16},
      {"int64", DType::i64},
      {"int32", DType::i32},
      {"uint8", DType::u8},
      {"int8", DType::i8},
  }};
  for (const auto& [torch_name, d] : torch_names) {
    if (text == torch_name) return d;
  }
  return std::nullopt;
}

/// The C++ type that stores one element of each DType.
template <DType D>
struct storage;
template <>
struct storage<DType::boolean> {
  using type = bool;
};
template <>
struct storage<DType::i8> {
  using type = std::int8_t;
};
template <>
struct storage<DType::i16> {
  using type = std::int16_t;
};
template <>
struct storage<DType::i32> {
  using type = std::int32_t;
};
template <>
struct storage<DType::i64> {
  using type = std::int64_t;
};
template <>
struct storage<DType::u8> {
  using type = std::uint8_t;
};
template <>
struct storage<DType::u16> {
  using type = std::uint16_t;
};
template <>
struct storage<DType::u32> {
  using type = std::uint32_t;
};
template <>
struct storage<DType::u64> {
  using type = std::uint64_t;
};
template <>
struct storage<DType::f16> {
  using type = f16;
};
template <>
struct storage<DType::bf16> {
  using type = bf16;
};
template <>
struct storage<DType::f32> {
  using type = float;
};
template <>
struct storage<DType::f64> {
  using type = double;
};
template <DType D>
using storage_t = typename storage<D>::type;

namespace dtype_detail {
template <class T, std::size_t... I>
consteval std::optional<DType> find(std::index_sequence<I...>) {
  std::optional<DType> found;
  ((std::same_as<T, storage_t<all_dtypes[I]>> ? (found = all_dtypes[I], 0) : 0), ...);
  return found;
}
template <class T>
inline constexpr std::optional<DType> dtype_of_opt = find<std::remove_cv_t<T>>(std::make_index_sequence<13>{});
}  // namespace dtype_detail

/// A C++ type that is the storage of one of the 13 dtypes (so `dtype_of<T>` exists).
template <class T>
concept Element = dtype_detail::dtype_of_opt<T>.has_value();

/// A floating element type: f16, bf16, f32 or f64.
template <class T>
concept FloatElement = Element<T> && is_floating(*dtype_detail::dtype_of_opt<T>);

template <Element T>
inline constexpr DType dtype_of = *dtype_detail::dtype_of_opt<T>;

/// Calls `fn(std::type_identity<T>{})` with the storage type of `d` (one instantiation per dtype).
template <class F>
constexpr decltype(auto) visit_dtype(DType d, F&& fn) {
  switch (d) {
    case DType::boolean: return fn(std::type_identity<bool>{});
    case DType::i8: return fn(std::type_identity<std::int8_t>{});
    case DType::i16: return fn(std::type_identity<std::int16_t>{});
    case DType::i32: return fn(std::type_identity<std::int32_t>{});
    case DType::i64: return fn(std::type_identity<std::int64_t>{});
    case DType::u8: return fn(std::type_identity<std::uint8_t>{});
    case DType::u16: return fn(std::type_identity<std::uint16_t>{});
    case DType::u32: return fn(std::type_identity<std::uint32_t>{});
    case DType::u64: return fn(std::type_identity<std::uint64_t>{});
    case DType::f16: return fn(std::type_identity<f16>{});
    case DType::bf16: return fn(std::type_identity<bf16>{});
    case DType::f32: return fn(std::type_identity<float>{});
    case DType::f64:
    case DType::count: break;  // not a dtype
  }
  return fn(std::type_identity<double>{});
}

/// Converts between any two element types through double (f16/bf16 round to nearest even).
template <Element To, Element From>
constexpr To convert_element(From value) {
  if constexpr (std::same_as<To, From>) {
    return value;
  } else {
    double wide = 0;
    if constexpr (std::same_as<From, f16> || std::same_as<From, bf16>) {
      wide = static_cast<double>(static_cast<float>(value));
    } else {
      wide = static_cast<double>(value);
    }
    if constexpr (std::same_as<To, f16> || std::same_as<To, bf16>) {
      return To(static_cast<float>(wide));
    } else if constexpr (std::same_as<To, bool>) {
      return wide != 0.0;
    } else {
      return static_cast<To>(wide);
    }
  }
}

}  // namespace teeny

export namespace teeny {
inline std::string to_string(DType d) { return std::string(name(d)); }
}  // namespace teeny
