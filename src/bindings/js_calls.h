// What every exported class of src/bindings needs: JS values to and from C++ ones (Shape: a C++
// struct as a plain JS object, declared once as an Embind value_object), and ErrorsByValue,
// which hands a C++ error to engine-errors.js instead of throwing through wasm.
#pragma once

#include <emscripten/bind.h>
#include <emscripten/val.h>

#include <algorithm>
#include <exception>
#include <initializer_list>
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
    return computed(name, +[](const T& o) { return CopyToJs(o.*kMember); });
  }
  template <typename R>
  Shape& computed(const char* name, R (*get)(const T&)) {
    object_.field(name, get, +[](T&, R) {});  // results only: JS never sends one back
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

// The classes Embind exports report a C++ error by value: Guarded runs a call and turns its
// exception into the message TakeLastError (JS: takeError) hands over once, plus a default
// result. src/bindings/engine-errors.js (linked as --post-js) wraps every method of the exported
// classes to throw that message as a JS Error after the call has returned. A JS exception thrown
// through wasm frames would unwind none of them: every failing call used to leave its message,
// the arguments Embind had copied in, and its frames on wasm's own stack behind.
class ErrorsByValue {
 protected:
  std::string TakeLastError() {  // the last failing call's message, "" when it succeeded
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
    // What a failing call returns; the caller reads the error from takeError().
    using Result = decltype(f());
    if constexpr (std::is_same_v<Result, val>) return val::undefined();
    else return Result();
  }

 private:
  mutable std::string error_;
};

}  // namespace gpt2
