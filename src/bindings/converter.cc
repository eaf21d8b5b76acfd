// The page's Converter (usage above its bindings, at the bottom): each call forwards to
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

val PlannedToJs(const ConvertSession::Planned& p, const char* bytes_name = "bytes") {
  return Object({{"tensors", val(p.tensors)},
                 {bytes_name, val(static_cast<double>(p.bytes))},
                 {"name", val(p.name)}});
}

// The conversion's state; the methods of the JS API are the lambdas registered at the bottom,
// each one guarded call (GUARDED_METHOD, js_calls.h).
class Converter : public ErrorsByValue {
 public:
  Converter() = default;
  Converter(const Converter&) = delete;

  const uint8_t*
  Held() {  // null before beginCheckpoint: the session says what else is missing first
    if (checkpoint.data() != nullptr) checkpoint.RequireComplete();
    return checkpoint.data();
  }
  void BeginCheckpoint(double total_bytes) {
    Free();
    checkpoint.Begin(total_bytes);
  }
  void Free() {
    s.Drop();
    piece.Free();
    checkpoint.Free();
  }
  double HeaderEnd(const std::vector<uint8_t>& first, double file_size) {
    return static_cast<double>(SafetensorsFile::HeaderEnd(
        first.data(), first.size(), static_cast<uint64_t>(file_size), "model.safetensors"));
  }
  val BeginStream(const std::vector<uint8_t>& prefix, double file_size, const std::string& type) {
    Free();
    return PlannedToJs(s.BeginStream(prefix.data(), prefix.size(), static_cast<uint64_t>(file_size),
                                     ParseConvertType(type)),
                       "sourceBytes");
  }
  val NextRange() {  // {offset, bytes} of the source the stream needs next, or null when done
    if (s.stream().done()) return val::null();
    const Gpt2GgufStream::Range r = s.stream().next();
    piece.Begin(static_cast<double>(r.bytes));
    return Object({{"offset", val(static_cast<double>(r.offset))},
                   {"bytes", val(static_cast<double>(r.bytes))}});
  }
  val FeedPiece() {  // {fed, sourceBytes, tensorsDone, outputBytes (0 until known)}
    Gpt2GgufStream& stream = s.stream();
    piece.RequireComplete();
    stream.Feed(piece.data(), piece.size());
    piece.Free();
    return Object({{"fed", val(static_cast<double>(stream.fed_bytes()))},
                   {"sourceBytes", val(static_cast<double>(stream.source_bytes()))},
                   {"tensorsDone", val(stream.tensors_done())},
                   {"outputBytes", val(static_cast<double>(stream.output_size()))}});
  }
  val TakeOutput() {
    const uint8_t* gguf = s.output();
    checkpoint.Free();  // first, so the copy's transient JS memory is not on top of it
    val out = CopyToJs(gguf, static_cast<size_t>(s.output_size()));
    Free();
    return out;
  }

  ConvertSession s;
  ArrivingFile checkpoint{"model.safetensors", "beginCheckpoint"};  // a held plan points into it
  ArrivingFile piece{"model.safetensors piece", "nextRange"};
};

}  // namespace
}  // namespace gpt2

// The whole checkpoint (beginCheckpoint, appendChunk...), then one of the plans, then
// convertNext() until done; or streamed: headerEnd(first bytes, file size) says how many of the
// file's first bytes beginStream needs, then nextRange(), appendPiece..., feedPiece() until
// nextRange() is null. takeOutput() gives the GGUF.
EMSCRIPTEN_BINDINGS(gpt2_converter) {
  using namespace gpt2;
#define CONVERTER_METHOD(js_name, params, ...) \
  GUARDED_METHOD(Converter, c, js_name, params, __VA_ARGS__)
  emscripten::class_<Converter>("Converter")
      .constructor<>()
      .function(
          "takeError", +[](Converter& c) { return c.TakeError(); })
      .CONVERTER_METHOD("setConfig", (, std::string json), c.s.SetConfig(json))
      .CONVERTER_METHOD("setVocabulary", (, std::string vocab, std::string merges),
                        c.s.SetVocabulary(vocab, merges))
      .CONVERTER_METHOD("beginCheckpoint", (, double total_bytes), c.BeginCheckpoint(total_bytes))
      .CONVERTER_METHOD("appendChunk", (, val bytes), AppendFromJs(c.checkpoint, bytes))
      .CONVERTER_METHOD(
          "plan", (, std::string type),
          PlannedToJs(c.s.Plan(c.Held(), c.checkpoint.size(), ParseConvertType(type))))
      .CONVERTER_METHOD("setSaeConfig", (, std::string json), c.s.SetSaeConfig(json))
      .CONVERTER_METHOD(
          "planSae", (, std::string type),
          PlannedToJs(c.s.PlanSae(c.Held(), c.checkpoint.size(), ParseConvertType(type))))
      .CONVERTER_METHOD("planTranscoder", (, std::string json, int layer, std::string type),
                        PlannedToJs(c.s.PlanTranscoder(c.Held(), c.checkpoint.size(), json, layer,
                                                       ParseConvertType(type))))
      .CONVERTER_METHOD("convertNext", (), c.s.ConvertNext())
      .CONVERTER_METHOD("headerEnd", (, val first, double file_size),
                        c.HeaderEnd(List<uint8_t>(first), file_size))
      .CONVERTER_METHOD("beginStream", (, val prefix, double file_size, std::string type),
                        c.BeginStream(List<uint8_t>(prefix), file_size, type))
      .CONVERTER_METHOD("nextRange", (), c.NextRange())
      .CONVERTER_METHOD("appendPiece", (, val bytes), AppendFromJs(c.piece, bytes))
      .CONVERTER_METHOD("feedPiece", (), c.FeedPiece())
      .CONVERTER_METHOD("takeOutput", (), c.TakeOutput());
#undef CONVERTER_METHOD
}
