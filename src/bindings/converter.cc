// The page's Converter (usage at the top of embind.cc): each call forwards to
// src/convert/convert_session.h's ConvertSession, which converts one tensor (or one streamed
// piece) per call, so the worker can report progress in between and hold a checkpoint only once.
// What stays here is JS's side: the downloaded bytes copied in and the results' objects.
#include <emscripten/bind.h>
#include <emscripten/val.h>

#include <string>
#include <vector>

#include "bindings/js_calls.h"
#include "convert/convert_session.h"
#include "format/safetensors.h"

namespace gpt2 {
namespace {

using emscripten::val;

val PlannedToJs(const ConvertSession::Planned& p, const char* bytes_name) {
  return Object({{"tensors", val(p.tensors)}, {bytes_name, val(static_cast<double>(p.bytes))}, {"name", val(p.name)}});
}

class Converter : public ErrorsByValue {
 public:
  Converter() = default;
  Converter(const Converter&) = delete;
  std::string TakeError() { return TakeLastError(); }

  void SetConfig(const std::string& json) { Guarded([&] { s_.SetConfig(json); return 0; }); }
  void SetVocabulary(const std::string& vocab_json, const std::string& merges_text) {
    Guarded([&] { s_.SetVocabulary(vocab_json, merges_text); return 0; });
  }
  void SetSaeConfig(const std::string& json) { Guarded([&] { s_.SetSaeConfig(json); return 0; }); }
  // The whole checkpoint (beginCheckpoint, appendChunk...), then one of the plans.
  void BeginCheckpoint(double total_bytes) { Guarded([&] { Free(); checkpoint_.Begin(total_bytes); return 0; }); }
  void AppendChunk(const val& bytes) { Guarded([&] { AppendFromJs(checkpoint_, bytes); return 0; }); }
  val Plan(const std::string& type) {
    return Guarded([&] { return PlannedToJs(s_.Plan(Held(), checkpoint_.size(), ParseConvertType(type)), "bytes"); });
  }
  val PlanSae(const std::string& type) {
    return Guarded([&] { return PlannedToJs(s_.PlanSae(Held(), checkpoint_.size(), ParseConvertType(type)), "bytes"); });
  }
  val PlanTranscoder(const std::string& sae_json, int layer, const std::string& type) {
    return Guarded([&] {
      return PlannedToJs(s_.PlanTranscoder(Held(), checkpoint_.size(), sae_json, layer, ParseConvertType(type)), "bytes");
    });
  }
  int ConvertNext() { return Guarded([&] { return s_.ConvertNext(); }); }

  // The streamed conversion: headerEnd(first bytes, file size) says how many of the file's first
  // bytes beginStream needs; then nextRange() ({offset, bytes} or null when done), appendPiece,
  // feedPiece() -> {fed, sourceBytes, tensorsDone, outputBytes (0 until known)}.
  double HeaderEnd(const val& first, double file_size) {
    return Guarded([&] {
      const std::vector<uint8_t> bytes = List<uint8_t>(first);
      return static_cast<double>(
          SafetensorsFile::HeaderEnd(bytes.data(), bytes.size(), static_cast<uint64_t>(file_size), "model.safetensors"));
    });
  }
  val BeginStream(const val& prefix, double file_size, const std::string& type) {
    return Guarded([&] {
      Free();
      const std::vector<uint8_t> bytes = List<uint8_t>(prefix);
      return PlannedToJs(s_.BeginStream(bytes.data(), bytes.size(), static_cast<uint64_t>(file_size),
                                        ParseConvertType(type)), "sourceBytes");
    });
  }
  val NextRange() {
    return Guarded([&] {
      if (s_.stream().done()) return val::null();
      const Gpt2GgufStream::Range r = s_.stream().next();
      piece_.Begin(static_cast<double>(r.bytes));
      return Object({{"offset", val(static_cast<double>(r.offset))}, {"bytes", val(static_cast<double>(r.bytes))}});
    });
  }
  void AppendPiece(const val& bytes) { Guarded([&] { AppendFromJs(piece_, bytes); return 0; }); }
  val FeedPiece() {
    return Guarded([&] {
      Gpt2GgufStream& stream = s_.stream();
      piece_.RequireComplete();
      stream.Feed(piece_.data(), piece_.size());
      piece_.Free();
      return Object({{"fed", val(static_cast<double>(stream.fed_bytes()))},
                     {"sourceBytes", val(static_cast<double>(stream.source_bytes()))},
                     {"tensorsDone", val(stream.tensors_done())},
                     {"outputBytes", val(static_cast<double>(stream.output_size()))}});
    });
  }

  val TakeOutput() {
    return Guarded([&] {
      const uint8_t* gguf = s_.output();
      checkpoint_.Free();  // first, so the copy's transient JS memory is not on top of it
      val out = CopyToJs(gguf, static_cast<size_t>(s_.output_size()));
      Free();
      return out;
    });
  }

 private:
  const uint8_t* Held() {  // null before beginCheckpoint: the session says what else is missing first
    if (checkpoint_.data() != nullptr) checkpoint_.RequireComplete();
    return checkpoint_.data();
  }
  void Free() {
    s_.Drop();
    piece_.Free();
    checkpoint_.Free();
  }

  ConvertSession s_;
  ArrivingFile checkpoint_{"model.safetensors", "beginCheckpoint"};  // a held plan points into it
  ArrivingFile piece_{"model.safetensors piece", "nextRange"};
};

}  // namespace
}  // namespace gpt2

EMSCRIPTEN_BINDINGS(gpt2_converter) {
  emscripten::class_<gpt2::Converter>("Converter")
      .constructor<>()
      .function("takeError", &gpt2::Converter::TakeError)
      .function("setConfig", &gpt2::Converter::SetConfig)
      .function("setVocabulary", &gpt2::Converter::SetVocabulary)
      .function("beginCheckpoint", &gpt2::Converter::BeginCheckpoint)
      .function("appendChunk", &gpt2::Converter::AppendChunk)
      .function("plan", &gpt2::Converter::Plan)
      .function("setSaeConfig", &gpt2::Converter::SetSaeConfig)
      .function("planSae", &gpt2::Converter::PlanSae)
      .function("planTranscoder", &gpt2::Converter::PlanTranscoder)
      .function("convertNext", &gpt2::Converter::ConvertNext)
      .function("headerEnd", &gpt2::Converter::HeaderEnd)
      .function("beginStream", &gpt2::Converter::BeginStream)
      .function("nextRange", &gpt2::Converter::NextRange)
      .function("appendPiece", &gpt2::Converter::AppendPiece)
      .function("feedPiece", &gpt2::Converter::FeedPiece)
      .function("takeOutput", &gpt2::Converter::TakeOutput);
}
