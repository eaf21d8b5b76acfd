// What every exported class of src/bindings needs: JS values to and from C++ ones (Shape: a C++
// struct as a plain JS object, declared once as an Embind value_object), and ErrorsByValue,
// which hands a C++ error to engine-errors.js instead of throwing through wasm.
#pragma once

#include <emscripten/bind.h>
#include <emscripten/val.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <functional>
#include <initializer_list>
#include <limits>
#include <new>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/error.h"
#include "format/arriving_file.h"

namespace gpt2 {

using emscripten::val;

template <typename T>
val CopyToJs(const T* data, size_t n) {
  return val(emscripten::typed_memory_view(n, data)).call<val>("slice");
}
template <typename T>
val CopyToJs(const std::vector<T>& v) {
  return CopyToJs(v.data(), v.size());
}
// A typed array of one member of each item from `from` on: Column(cells, &JobCell::value).
template <typename T, typename F>
val Column(const std::vector<T>& items, F T::*member, int from = 0) {
  std::vector<F> out;
  for (size_t i = std::max(0, from); i < items.size(); ++i) out.push_back(items[i].*member);
  return CopyToJs(out);
}
template <typename T>
val ViewToJs(const T* data, size_t n) {
  return val(emscripten::typed_memory_view(n, data));
}

// A JS object of the given fields: Object({{"a", val(1)}, {"b", CopyToJs(v)}}).
inline val Object(std::initializer_list<std::pair<const char*, val>> fields) {
  val out = val::object();
  for (const auto& field : fields) out.set(field.first, field.second);
  return out;
}

// A C++ struct returned to JS as a plain object (Embind's value_object), its fields named once:
//   Shape<SaliencyResult>("SaliencyResult").field("total", &SaliencyResult::total)
//       .array<&SaliencyResult::values>("values")          // a fresh Float64Array
//       .computed("names", +[](const X& x) { return ...; }) // anything derived
template <typename T>
class Shape {
 public:
  explicit Shape(const char* name) : object_(name) {}
  template <typename F>
  Shape& field(const char* name, F T::*member) {
    object_.field(name, member);
    return *this;
  }
  template <auto kMember>
  Shape& array(const char* name) {
    return computed(
        name, +[](const T& o) { return CopyToJs(o.*kMember); });
  }
  template <typename R>
  Shape& computed(const char* name, R (*get)(const T&)) {
    object_.field(
        name, get, +[](T&, R) {});  // results only: JS never sends one back
    return *this;
  }

 private:
  emscripten::value_object<T> object_;
};

// Copies a Uint8Array (or ArrayBuffer view) straight into the file's next bytes.
inline void AppendFromJs(ArrivingFile& file, const val& bytes) {
  const size_t n = bytes["length"].as<size_t>();
  val(emscripten::typed_memory_view(n, file.Append(n))).call<void>("set", bytes);
}

inline bool Given(const val& v) { return !v.isUndefined() && !v.isNull(); }

template <typename T = int>
std::vector<T> List(const val& v) {  // a JS array or typed array (undefined or null: empty)
  return Given(v) ? emscripten::convertJSArrayToNumberVector<T>(v) : std::vector<T>();
}

// --- Requests: a JS object read into a C++ struct, its fields named once (Shape's other way) ---
//   template <> const Request<ResidPatch>& RequestOf() {
//     static const auto r = Request<ResidPatch>().field("layer", &ResidPatch::layer)...; return r;
//     }
//   ReadJs<LabInterventions>(spec, "interventions")
// Every field is optional (absent, undefined or null: the member's default). A field the table
// does not name, or a value of the wrong kind, is an error naming it ("interventions.skipMlp[1]
// must be a whole number"): a misspelt request fails instead of running without what it asked.
template <typename T>
class Request;
template <typename T>
const Request<T>& RequestOf();  // one specialisation per request struct (embind.cc)
template <typename T>
struct IsList : std::false_type {};
template <typename E>
struct IsList<std::vector<E>> : std::true_type {};
template <typename T>
struct IsPair : std::false_type {};
template <typename A, typename B>
struct IsPair<std::pair<A, B>> : std::true_type {};
inline bool IsArray(const val& v) { return val::global("Array").call<bool>("isArray", v); }

// v as T: a number, bool, string, vector (a JS array; of numbers, also a typed array), [a, b]
// pair, or a struct with a RequestOf table. `where` names v in errors.
template <typename T>
T ReadJs(const val& v, const std::string& where) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.isTrue() && !v.isFalse()) throw Error(where + " must be true or false");
    return v.isTrue();
  } else if constexpr (std::is_arithmetic_v<T>) {
    const double d = v.isNumber() ? v.as<double>() : NAN, lo = std::numeric_limits<T>::lowest();
    const double above =
        static_cast<double>(std::numeric_limits<T>::max()) + 1;  // 2^64 for uint64_t
    if (!std::isfinite(d)) throw Error(where + " must be a number");
    if (std::is_integral_v<T> && (d != std::floor(d) || d < lo || !(d < above))) {
      throw Error(where + " must be a whole number" + (lo == 0 ? " >= 0" : ""));
    }
    return static_cast<T>(d);
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!v.isString()) throw Error(where + " must be a string");
    return v.as<std::string>();
  } else if constexpr (IsList<T>::value) {
    using E = typename T::value_type;
    if constexpr (std::is_arithmetic_v<E> && !std::is_same_v<E, bool>) {  // a typed array: one copy
      if (val::global("ArrayBuffer").call<bool>("isView", v) && v["BYTES_PER_ELEMENT"].isNumber() &&
              !v.instanceof
          (val::global("BigInt64Array")) && !v.instanceof (val::global("BigUint64Array"))) {
        return emscripten::convertJSArrayToNumberVector<E>(v);
      }
    }
    if (!IsArray(v)) throw Error(where + " must be a list");
    T out;
    for (int i = 0, n = v["length"].as<int>(); i < n; ++i)
      out.push_back(ReadJs<E>(v[i], where + "[" + std::to_string(i) + "]"));
    return out;
  } else if constexpr (IsPair<T>::value) {
    if (!IsArray(v) || v["length"].as<int>() != 2) throw Error(where + " must be a pair [a, b]");
    return {ReadJs<typename T::first_type>(v[0], where + "[0]"),
            ReadJs<typename T::second_type>(v[1], where + "[1]")};
  } else {
    return RequestOf<T>().Read(v, where);
  }
}

template <typename T>
class Request {
 public:
  template <typename F>
  Request& field(const char* name, F T::*member) {
    fields_.push_back({name, [member](const val& v, T& out, const std::string& at) {
                         out.*member = ReadJs<F>(v, at);
                       }});
    return *this;
  }
  template <typename M>  // every field of M's table, read into the member `outer`
  Request& fields(M T::*outer, const Request<M>& table) {
    for (const auto& f : table.fields_) {
      fields_.push_back({f.name, [=, read = f.read](const val& v, T& out, const std::string& at) {
                           read(v, out.*outer, at);
                         }});
    }
    return *this;
  }

  T Read(const val& v, const std::string& where) const {
    T out{};
    if (!Given(v)) return out;
    if (v.typeOf().as<std::string>() != "object" || IsArray(v))
      throw Error(where + " must be an object");
    const val keys = val::global("Object").call<val>("keys", v);
    for (int i = 0, n = keys["length"].as<int>(); i < n; ++i) {
      const std::string key = keys[i].as<std::string>();
      if (std::none_of(fields_.begin(), fields_.end(),
                       [&](const Field& f) { return key == f.name; })) {
        std::string names;
        for (const Field& f : fields_) names += std::string(names.empty() ? "" : ", ") + f.name;
        throw Error(where + " has no field '" + key + "' (its fields: " + names + ")");
      }
    }
    for (const Field& f : fields_) {
      if (Given(v[f.name])) f.read(v[f.name], out, where + "." + f.name);
    }
    return out;
  }

 private:
  template <typename>
  friend class Request;
  struct Field {
    const char* name;
    std::function<void(const val&, T&, const std::string&)> read;
  };
  std::vector<Field> fields_;
};

// One method of an exported class, its body run Guarded with the object named `self`:
//   .GUARDED_METHOD(Converter, c, "plan", (, std::string type), c.Plan(type))
#define GPT2_UNPAREN(...) __VA_ARGS__
#define GUARDED_METHOD(Class, self, js_name, params, ...) \
  function(                                               \
      js_name,                                            \
      +[](Class& self GPT2_UNPAREN params) { return self.Guarded([&] { return __VA_ARGS__; }); })

// The classes Embind exports report a C++ error by value: Guarded runs a call and turns its
// exception into the message TakeError (JS: takeError) hands over once, plus a default result;
// src/bindings/engine-errors.js (--post-js) rethrows it as a JS Error after the call returned. A
// JS exception thrown through wasm frames unwinds none of them: it would leave its message, the
// arguments Embind copied in and the frames on wasm's own stack behind.
class ErrorsByValue {
 public:
  std::string TakeError() {  // the last failing call's message, "" when it succeeded
    std::string message;
    message.swap(error_);
    return message;
  }

  template <typename F>
  auto Guarded(F&& f) const -> decltype(f()) {
    try {
      return f();
    } catch (const Error& e) {
      error_ = e.what();
    } catch (const std::bad_alloc&) {
      error_ =
          "Not enough memory: the browser tab could not allocate more (WebAssembly is limited to "
          "4 GB). Try a smaller model (q8_0 or q4_0), a shorter prompt, or turn off activation "
          "capture.";
    } catch (const std::exception& e) {
      error_ = std::string("Internal error: ") + e.what();
    }
    using Result = decltype(f());  // what a failing call returns; takeError() has its message
    if constexpr (std::is_same_v<Result, val>)
      return val::undefined();
    else
      return Result();
  }

 private:
  mutable std::string error_;
};

}  // namespace gpt2
