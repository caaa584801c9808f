// teeny.std — the C++ standard library names teeny's own module units use, as one module that each
// of them imports instead of including the standard headers in its global module fragment.
//
// Why: clang keeps every header a unit's global module fragment includes in that unit's BMI, and a
// unit that imports others merges its copy with each of theirs and writes the merged result out.
// With ~110 units each including <string>, <vector>, <algorithm>, ..., that merging cost 3-7 s per
// standard header in every unit (a unit importing teeny.ops and including only <vector> took 6.6 s
// to precompile, against 0.3 s without the imports) and was most of the build. Declared once here,
// the library is merged nowhere. (C++23's `import std;` is this module; libstdc++ 12 has none.)
//
// Names only: a module exports no macros, so a unit that needs one (errno, NAN, INT64_MAX,
// SEEK_SET) still includes that C header. A name missing here is a compile error in the unit that
// uses it ("declaration of 'X' must be imported"): add it below. Not std::make_shared:
// libstdc++'s shared_ptr befriends it, and clang refuses to befriend a function that an exported
// using declaration names ("cannot befriend target of using declaration"): a unit that calls it
// includes <memory>.
module;
#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <climits>
#include <cmath>
#include <compare>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <new>
#include <numbers>
#include <numeric>
#include <optional>
#include <ranges>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>
export module teeny.std;

export namespace std {
// <cstddef>, <cstdint>, <new>
using std::align_val_t;
using std::byte;
using std::int16_t;
using std::int32_t;
using std::int64_t;
using std::int8_t;
using std::nothrow;
using std::nullptr_t;
using std::ptrdiff_t;
using std::size_t;
using std::to_integer;
using std::uint16_t;
using std::uint32_t;
using std::uint64_t;
using std::uint8_t;
using std::uintptr_t;

// <type_traits>, <concepts>, <compare>
using std::bool_constant;
using std::common_type_t;
using std::conditional_t;
using std::constructible_from;
using std::convertible_to;
using std::copy_constructible;
using std::copyable;
using std::decay_t;
using std::declval;
using std::enable_if_t;
using std::equality_comparable;
using std::false_type;
using std::floating_point;
using std::integral;
using std::integral_constant;
using std::invocable;
using std::invoke_result_t;
using std::is_arithmetic_v;
using std::is_enum_v;
using std::is_floating_point_v;
using std::is_integral_v;
using std::is_pointer_v;
using std::is_reference_v;
using std::is_same_v;
using std::is_signed_v;
using std::is_trivially_copyable_v;
using std::is_unsigned_v;
using std::make_signed_t;
using std::make_unsigned_t;
using std::partial_ordering;
using std::remove_const_t;
using std::remove_cv_t;
using std::remove_cvref_t;
using std::remove_reference_t;
using std::same_as;
using std::strong_ordering;
using std::true_type;
using std::type_identity;
using std::type_identity_t;
using std::underlying_type_t;
using std::weak_ordering;

// <utility>, <tuple>, <functional>
using std::apply;
using std::as_const;
using std::exchange;
using std::forward;
using std::function;
using std::get;
using std::in_place_index;
using std::in_range;
using std::index_sequence;
using std::invoke;
using std::less;
using std::make_index_sequence;
using std::make_pair;
using std::make_tuple;
using std::move;
using std::pair;
using std::swap;
using std::tie;
using std::tuple;
using std::tuple_cat;
using std::tuple_element;
using std::tuple_element_t;
using std::tuple_size;
using std::tuple_size_v;

// <memory>, <atomic>
using std::atomic;
using std::make_unique;
using std::shared_ptr;
using std::unique_ptr;

// containers and views
using std::array;
using std::as_bytes;
using std::as_writable_bytes;
using std::dynamic_extent;
using std::initializer_list;
using std::map;
using std::set;
using std::span;
using std::to_array;
using std::unordered_set;
using std::vector;

// <string>, <string_view>, <charconv>, <system_error>
using std::errc;
using std::error_code;
using std::from_chars;
using std::from_chars_result;
using std::string;
using std::string_view;
using std::to_chars;
using std::to_chars_result;
using std::to_string;

// <optional>, <variant>
using std::get_if;
using std::holds_alternative;
using std::monostate;
using std::nullopt;
using std::nullopt_t;
using std::optional;
using std::variant;
using std::visit;

// <algorithm>, <numeric>, <iterator>, <bit>
using std::any_of;
using std::back_inserter;
using std::begin;
using std::bit_cast;
using std::clamp;
using std::copy;
using std::data;
using std::end;
using std::endian;
using std::fill;
using std::find;
using std::find_if;
using std::gcd;
using std::iota;
using std::max;
using std::min;
using std::reverse;
using std::size;

// <limits>, <cmath>
using std::abs;
using std::ceil;
using std::cos;
using std::exp;
using std::floor;
using std::isfinite;
using std::isinf;
using std::isnan;
using std::log;
using std::log1p;
using std::numeric_limits;
using std::pow;
using std::sqrt;

// <cstring>, <cstdio>, <cstdlib>
using std::abort;
using std::fclose;
using std::FILE;
using std::fopen;
using std::fprintf;
using std::fread;
using std::fseek;
using std::fwrite;
using std::memcpy;
using std::memmove;
using std::memset;
using std::printf;
using std::puts;
using std::remove;
using std::rename;
using std::snprintf;
using std::strerror;

// Operators on the types above, which argument-dependent lookup finds only where they are visible.
using std::operator==;
using std::operator!=;
using std::operator<;
using std::operator<=;
using std::operator>;
using std::operator>=;
using std::operator<=>;
using std::operator+;
using std::operator-;
using std::operator|;
using std::operator&;
using std::operator^;
using std::operator~;
}  // namespace std

export namespace std::ranges {
using std::ranges::adjacent_find;
using std::ranges::all_of;
using std::ranges::any_of;
using std::ranges::contiguous_range;
using std::ranges::data;
using std::ranges::equal;
using std::ranges::find;
using std::ranges::forward_range;
using std::ranges::includes;
using std::ranges::make_heap;
using std::ranges::pop_heap;
using std::ranges::push_heap;
using std::ranges::range_value_t;
using std::ranges::reverse;
using std::ranges::set_difference;
using std::ranges::size;
using std::ranges::sized_range;
using std::ranges::sort;
using std::ranges::unique;
using std::ranges::upper_bound;
}  // namespace std::ranges

export namespace std::chrono {
using std::chrono::duration;
using std::chrono::duration_cast;
using std::chrono::nanoseconds;
using std::chrono::steady_clock;
using std::chrono::operator-;
using std::chrono::operator+;
using std::chrono::operator<;
using std::chrono::operator==;
}  // namespace std::chrono

export namespace std::filesystem {
using std::filesystem::exists;
using std::filesystem::file_size;
using std::filesystem::is_regular_file;
using std::filesystem::path;
using std::filesystem::weakly_canonical;
}  // namespace std::filesystem

export namespace std::numbers {
using std::numbers::pi;
}  // namespace std::numbers

// libstdc++'s vector and string iterators (__gnu_cxx::__normal_iterator) are compared and
// subtracted by operators declared in their own namespace.
export namespace __gnu_cxx {
using __gnu_cxx::operator==;
using __gnu_cxx::operator<=>;
using __gnu_cxx::operator-;
using __gnu_cxx::operator+;
}  // namespace __gnu_cxx
