// teeny.io:json — a small strict JSON reader and string quoter, internal to teeny.io (it reads
// safetensors headers; nlohmann::json throws and teeny builds without exceptions).
//
//   auto v = json::parse(R"({"a": [1, 2]})", "header JSON");   // Result<json::Value>
//   v->find("a")->items[1].integer == 2;
//   json::parse("{\"a\" 1}", "header JSON")   -> "bad header JSON at byte 5: expected ':'"
//
// Strict means RFC 8259 and nothing else: no comments, no trailing commas, no NaN, no single
// quotes, no duplicate keys, no invalid UTF-8 or lone surrogates, no control characters inside
// strings, nothing but whitespace after the value. Nesting deeper than 64 levels is refused so
// that hostile input cannot exhaust the stack.
module teeny.io:json;
import teeny.std;
import teeny.core;

namespace teeny::json {

inline constexpr int max_depth = 64;

/// One parsed JSON value. Objects keep their keys in file order (`keys[i]` names `items[i]`).
struct Value {
  enum class Kind : std::uint8_t { null, boolean, number, string, array, object };

  Kind kind = Kind::null;
  bool boolean = false;
  double number = 0;                    // any number
  std::optional<std::int64_t> integer;  // set when the number is written as an integer that fits int64
  std::string string;
  std::vector<std::string> keys;  // object keys
  std::vector<Value> items;       // array elements, or object values
  std::size_t offset = 0;         // byte where the value starts in the text

  bool is_object() const { return kind == Kind::object; }
  bool is_array() const { return kind == Kind::array; }
  bool is_string() const { return kind == Kind::string; }
  /// The member named `key` of an object, or nullptr.
  const Value* find(std::string_view key) const {
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (keys[i] == key) return &items[i];
    }
    return nullptr;
  }
};

/// "an object", "a string", ...: what a value is, for error messages.
std::string_view describe(Value::Kind kind) {
  switch (kind) {
    case Value::Kind::null: return "null";
    case Value::Kind::boolean: return "a boolean";
    case Value::Kind::number: return "a number";
    case Value::Kind::string: return "a string";
    case Value::Kind::array: return "an array";
    case Value::Kind::object: return "an object";
  }
  return "a value";
}

namespace detail {

class Parser {
 public:
  Parser(std::string_view text, std::string_view what) : text_(text), what_(what) {}

  Result<Value> document() {
    skip_space();
    auto v = value(0);
    if (!v) return v;
    skip_space();
    if (pos_ != text_.size()) return error("unexpected ", quoted_char(), " after the value");
    return v;
  }

 private:
  template <class... Parts>
  Error error_at(std::size_t at, const Parts&... parts) const {
    return fail(Errc::parse, "bad ", what_, " at byte ", at, ": ", parts...);
  }
  template <class... Parts>
  Error error(const Parts&... parts) const {
    return error_at(pos_, parts...);
  }
  /// The current character for a message: "'x'", "byte 0x07" or "end of input".
  std::string quoted_char() const {
    if (pos_ >= text_.size()) return "end of input";
    const auto c = static_cast<unsigned char>(text_[pos_]);
    if (c >= 0x20 && c < 0x7f) return cat("'", static_cast<char>(c), "'");
    const char* digits = "0123456789abcdef";
    return cat("byte 0x", digits[c >> 4], digits[c & 15]);
  }
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return text_[pos_]; }
  void skip_space() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) ++pos_;
  }
  bool consume(char c) {
    if (at_end() || peek() != c) return false;
    ++pos_;
    return true;
  }

  Result<Value> value(int depth) {
    if (at_end()) return error("expected a value, got end of input");
    Value v;
    v.offset = pos_;
    switch (peek()) {
      case '{': return object(depth);
      case '[': return array(depth);
      case '"': {
        auto s = string();
        if (!s) return std::move(s).error();
        v.kind = Value::Kind::string;
        v.string = std::move(*s);
        return v;
      }
      case 't': return literal("true", Value::Kind::boolean, true);
      case 'f': return literal("false", Value::Kind::boolean, false);
      case 'n': return literal("null", Value::Kind::null, false);
      default: break;
    }
    if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return number();
    return error("expected a value, got ", quoted_char());
  }

  Result<Value> literal(std::string_view word, Value::Kind kind, bool truth) {
    Value v;
    v.offset = pos_;
    if (text_.substr(pos_, word.size()) != word) return error("expected '", word, "'");
    pos_ += word.size();
    v.kind = kind;
    v.boolean = truth;
    return v;
  }

  Result<Value> object(int depth) {
    if (depth >= max_depth) return error("nested deeper than ", max_depth, " levels");
    Value v;
    v.kind = Value::Kind::object;
    v.offset = pos_++;                     // '{'
    std::unordered_set<std::string> seen;  // a header may name tens of thousands of tensors
    skip_space();
    if (consume('}')) return v;
    while (true) {
      skip_space();
      const std::size_t key_at = pos_;
      if (at_end() || peek() != '"') return error("expected a string key, got ", quoted_char());
      auto key = string();
      if (!key) return std::move(key).error();
      if (!seen.insert(*key).second) return error_at(key_at, "duplicate key \"", *key, "\"");
      skip_space();
      if (!consume(':')) return error("expected ':'");
      skip_space();
      auto member = value(depth + 1);
      if (!member) return member;
      v.keys.push_back(std::move(*key));
      v.items.push_back(std::move(*member));
      skip_space();
      if (consume(',')) continue;
      if (consume('}')) return v;
      return error("expected ',' or '}'");
    }
  }

  Result<Value> array(int depth) {
    if (depth >= max_depth) return error("nested deeper than ", max_depth, " levels");
    Value v;
    v.kind = Value::Kind::array;
    v.offset = pos_++;  // '['
    skip_space();
    if (consume(']')) return v;
    while (true) {
      skip_space();
      auto item = value(depth + 1);
      if (!item) return item;
      v.items.push_back(std::move(*item));
      skip_space();
      if (consume(',')) continue;
      if (consume(']')) return v;
      return error("expected ',' or ']'");
    }
  }

  Result<Value> number() {
    Value v;
    v.kind = Value::Kind::number;
    v.offset = pos_;
    const std::size_t start = pos_;
    auto digits = [&] {
      const std::size_t from = pos_;
      while (!at_end() && peek() >= '0' && peek() <= '9') ++pos_;
      return pos_ - from;
    };
    consume('-');
    if (at_end() || peek() < '0' || peek() > '9') return error("expected a digit, got ", quoted_char());
    if (peek() == '0') {
      ++pos_;
      if (!at_end() && peek() >= '0' && peek() <= '9') return error("a number may not have a leading zero");
    } else {
      digits();
    }
    bool integral = true;
    if (consume('.')) {
      integral = false;
      if (digits() == 0) return error("expected a digit after '.', got ", quoted_char());
    }
    if (!at_end() && (peek() == 'e' || peek() == 'E')) {
      integral = false;
      ++pos_;
      if (!consume('+')) consume('-');
      if (digits() == 0) return error("expected a digit in the exponent, got ", quoted_char());
    }
    const char* first = text_.data() + start;
    const char* last = text_.data() + pos_;
    if (integral) {
      std::int64_t n = 0;
      if (std::from_chars(first, last, n).ec == std::errc{}) v.integer = n;
    }
    // Out-of-range magnitudes leave number at 0 or as parsed; only integers matter to callers.
    (void)std::from_chars(first, last, v.number);
    return v;
  }

  /// Reads 4 hex digits of a \u escape.
  Result<std::uint32_t> hex4() {
    std::uint32_t code = 0;
    for (int i = 0; i < 4; ++i) {
      if (at_end()) return error("expected a hex digit, got end of input");
      const char c = peek();
      std::uint32_t digit = 0;
      if (c >= '0' && c <= '9') {
        digit = static_cast<std::uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        digit = static_cast<std::uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        digit = static_cast<std::uint32_t>(c - 'A' + 10);
      } else {
        return error("expected a hex digit, got ", quoted_char());
      }
      code = code * 16 + digit;
      ++pos_;
    }
    return code;
  }

  static void append_utf8(std::string& out, std::uint32_t code) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xc0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3f));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xe0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (code & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (code & 0x3f));
    }
  }

  /// Length of the valid UTF-8 sequence starting at pos_ (lead byte >= 0x80), or 0.
  std::size_t utf8_sequence() const {
    auto byte = [&](std::size_t i) {
      return pos_ + i < text_.size() ? static_cast<unsigned char>(text_[pos_ + i]) : 0u;
    };
    auto cont = [&](std::size_t i) { return (byte(i) & 0xc0u) == 0x80u; };
    const unsigned lead = byte(0);
    if (lead >= 0xc2 && lead <= 0xdf) return cont(1) ? 2 : 0;
    if (lead >= 0xe0 && lead <= 0xef) {
      const unsigned b1 = byte(1);
      if (lead == 0xe0 && b1 < 0xa0) return 0;   // overlong
      if (lead == 0xed && b1 >= 0xa0) return 0;  // a UTF-16 surrogate
      return cont(1) && cont(2) ? 3 : 0;
    }
    if (lead >= 0xf0 && lead <= 0xf4) {
      const unsigned b1 = byte(1);
      if (lead == 0xf0 && b1 < 0x90) return 0;   // overlong
      if (lead == 0xf4 && b1 >= 0x90) return 0;  // above U+10FFFF
      return cont(1) && cont(2) && cont(3) ? 4 : 0;
    }
    return 0;
  }

  Result<std::string> string() {
    ++pos_;  // '"'
    std::string out;
    while (true) {
      if (at_end()) return error("unterminated string");
      const auto c = static_cast<unsigned char>(peek());
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20) return error("control character ", quoted_char(), " in a string (it must be escaped)");
      if (c >= 0x80) {
        const std::size_t n = utf8_sequence();
        if (n == 0) return error("invalid UTF-8 in a string");
        out.append(text_.substr(pos_, n));
        pos_ += n;
        continue;
      }
      if (c != '\\') {
        out += static_cast<char>(c);
        ++pos_;
        continue;
      }
      ++pos_;
      if (at_end()) return error("unterminated string");
      const char e = peek();
      ++pos_;
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          const std::size_t escape_at = pos_ - 2;
          auto code = hex4();
          if (!code) return std::move(code).error();
          if (*code >= 0xdc00 && *code <= 0xdfff) return error_at(escape_at, "lone trailing surrogate in \\u escape");
          if (*code >= 0xd800 && *code <= 0xdbff) {
            if (!consume('\\') || !consume('u')) return error_at(escape_at, "lone leading surrogate in \\u escape");
            auto low = hex4();
            if (!low) return std::move(low).error();
            if (*low < 0xdc00 || *low > 0xdfff) return error_at(escape_at, "lone leading surrogate in \\u escape");
            *code = 0x10000 + ((*code - 0xd800) << 10) + (*low - 0xdc00);
          }
          append_utf8(out, *code);
          break;
        }
        default: --pos_; return error("invalid escape '\\", e, "'");
      }
    }
  }

  std::string_view text_;
  std::string_view what_;
  std::size_t pos_ = 0;
};

}  // namespace detail

/// Parses one JSON document. Errors read "bad <what> at byte <n>: <why>".
Result<Value> parse(std::string_view text, std::string_view what) { return detail::Parser(text, what).document(); }

/// Appends `text` as a JSON string literal (quotes, escapes; UTF-8 passes through).
void append_quoted(std::string& out, std::string_view text) {
  out += '"';
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          const char* digits = "0123456789abcdef";
          out += "\\u00";
          out += digits[c >> 4];
          out += digits[c & 15];
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

}  // namespace teeny::json
