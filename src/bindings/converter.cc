// The page's Converter (usage at the top of embind.cc): forwards to src/convert/convert.h, which
// converts a Hugging Face GPT-2 checkpoint to GGUF one tensor per call, so the worker can report
// progress in between and hold the checkpoint only once.
#include <emscripten/bind.h>
#include <emscripten/val.h>

#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "bindings/download_buffer.h"
#include "bindings/js_calls.h"
#include "convert/convert.h"
#include "convert/sae_convert.h"
#include "format/safetensors.h"
#include "sae/transcoders.h"
#include "tokenizer/tokenizer.h"

namespace gpt2 {
namespace {

using emscripten::val;

class Converter : public ErrorsByValue {
 public:
  Converter() = default;
  Converter(const Converter&) = delete;
  std::string TakeError() { return TakeLastError(); }
  ~Converter() { Free(); }

  void SetConfig(const std::string& json) {
    Guarded([&] { config_ = ConfigFromHfJson(json); has_config_ = true; return 0; });
  }
  void SetVocabulary(const std::string& vocab_json, const std::string& merges_text) {
    Guarded([&] { tokenizer_ = Tokenizer::FromText(vocab_json, merges_text, "vocab.json"); return 0; });
  }
  // A SAELens SAE (convert/sae_convert.h): setSaeConfig(cfg.json text), the weights through
  // beginCheckpoint/appendChunk, planSae(type), then convertNext/takeOutput as for GPT-2.
  void SetSaeConfig(const std::string& json) {
    Guarded([&] { sae_config_ = SaeConfigFromJson(json); sae_cfg_json_ = json; has_sae_config_ = true; return 0; });
  }
  val PlanSae(const std::string& type) {
    return Guarded([&] {
      if (!has_sae_config_) throw Error("planSae needs setSaeConfig first");
      ParseCheckpoint("sae_weights.safetensors");
      sae_ = std::make_unique<SaeGgufInMemory>(*checkpoint_, sae_config_, sae_cfg_json_, ParseConvertType(type),
                                               kMaxOutputBytes);
      return Object({{"tensors", val(sae_->num_tensors())}, {"bytes", val(static_cast<double>(sae_->size()))}});
    });
  }
  // One block of a transcoder set (convert/sae_convert.h): the block's sae.safetensors through
  // beginCheckpoint/appendChunk, then planTranscoder(sae.json text, may be empty; block; type):
  // the output is a set of that block alone, which the engine's loadTranscoders adds to its set.
  val PlanTranscoder(const std::string& sae_json, int layer, const std::string& type) {
    return Guarded([&] {
      ParseCheckpoint("sae.safetensors");
      const SaeGgufPart part{checkpoint_.get(), TranscoderPartConfig(*checkpoint_, sae_json, layer), sae_json,
                             TranscoderPrefix(layer)};
      sae_ = std::make_unique<SaeGgufInMemory>(std::vector<SaeGgufPart>{part}, ParseConvertType(type), kMaxOutputBytes);
      return Object({{"tensors", val(sae_->num_tensors())}, {"bytes", val(static_cast<double>(sae_->size()))}});
    });
  }
  void BeginCheckpoint(double total_bytes) { Guarded([&] { Free(); checkpoint_bytes_.Begin(total_bytes); return 0; }); }
  void AppendChunk(const val& bytes) { Guarded([&] { checkpoint_bytes_.Append(bytes); return 0; }); }

  val Plan(const std::string& type) {
    return Guarded([&] {
      if (!has_config_ || tokenizer_ == nullptr) throw Error("plan needs setConfig and setVocabulary first");
      ParseCheckpoint("model.safetensors");
      const std::string name = Gpt2DefaultModelName(config_);
      conversion_ = std::make_unique<Gpt2GgufInMemory>(*checkpoint_, config_, tokenizer_.get(),
                                                       ParseConvertType(type), name, kMaxOutputBytes);
      return Object({{"tensors", val(conversion_->num_tensors())},
                     {"bytes", val(static_cast<double>(conversion_->size()))}, {"name", val(name)}});
    });
  }
  // The streamed conversion (Gpt2GgufStream): the checkpoint is never held, only the piece the
  // converter asks for next, which the worker fetches with an HTTP Range request.
  // headerEnd(first bytes, file size): how many of the file's first bytes beginStream needs.
  double HeaderEnd(const val& first, double file_size) {
    return Guarded([&] {
      const std::vector<uint8_t> bytes = List<uint8_t>(first);
      return static_cast<double>(
          SafetensorsFile::HeaderEnd(bytes.data(), bytes.size(), static_cast<uint64_t>(file_size), "model.safetensors"));
    });
  }
  val BeginStream(const val& prefix, double file_size, const std::string& type) {
    return Guarded([&] {
      if (!has_config_ || tokenizer_ == nullptr) throw Error("beginStream needs setConfig and setVocabulary first");
      Free();
      const std::vector<uint8_t> bytes = List<uint8_t>(prefix);
      const std::string name = Gpt2DefaultModelName(config_);
      stream_ = std::make_unique<Gpt2GgufStream>(bytes.data(), bytes.size(), static_cast<uint64_t>(file_size),
                                                 config_, tokenizer_.get(), ParseConvertType(type), name,
                                                 kMaxOutputBytes);
      return Object({{"tensors", val(stream_->num_tensors())},
                     {"sourceBytes", val(static_cast<double>(stream_->source_bytes()))}, {"name", val(name)}});
    });
  }
  // {offset, bytes} of the piece wanted next (its buffer allocated: appendPiece fills it), or
  // null when every tensor is converted.
  val NextRange() {
    return Guarded([&] {
      RequireStream();
      if (stream_->done()) return val::null();
      const Gpt2GgufStream::Range r = stream_->next();
      piece_.Begin(static_cast<double>(r.bytes));
      return Object({{"offset", val(static_cast<double>(r.offset))}, {"bytes", val(static_cast<double>(r.bytes))}});
    });
  }
  void AppendPiece(const val& bytes) { Guarded([&] { piece_.Append(bytes); return 0; }); }
  // Converts the piece appended; returns {fed, sourceBytes, tensorsDone, outputBytes (0 until known)}.
  val FeedPiece() {
    return Guarded([&] {
      RequireStream();
      piece_.RequireComplete();
      stream_->Feed(piece_.data(), piece_.size());
      piece_.Free();
      return Object({{"fed", val(static_cast<double>(stream_->fed_bytes()))},
                     {"sourceBytes", val(static_cast<double>(stream_->source_bytes()))},
                     {"tensorsDone", val(stream_->tensors_done())},
                     {"outputBytes", val(static_cast<double>(stream_->output_size()))}});
    });
  }

  int ConvertNext() {
    return Guarded([&] {
      if (sae_ != nullptr) return sae_->ConvertNext();
      if (conversion_ == nullptr) throw Error("convertNext called before plan");
      return conversion_->ConvertNext();
    });
  }
  val TakeOutput() {
    return Guarded([&] {
      if (stream_ == nullptr && sae_ == nullptr && conversion_ == nullptr) {
        throw Error("takeOutput called before every tensor was converted");
      }
      const uint8_t* gguf = stream_ ? stream_->output() : sae_ ? sae_->output() : conversion_->output();
      const size_t size = stream_ ? stream_->output_size() : sae_ ? sae_->size() : conversion_->size();
      // The checkpoint goes first, so the copy's transient JS memory is not on top of it.
      checkpoint_.reset();
      checkpoint_bytes_.Free();
      val out = CopyToJs(gguf, size);
      Free();
      return out;
    });
  }

 private:
  // The converted file must fit the module's memory beside what else is there.
  static constexpr uint64_t kMaxOutputBytes = kWasmMemoryBudget;

  // The checkpoint appended, parsed; a second plan replaces the first.
  void ParseCheckpoint(const char* name) {
    checkpoint_bytes_.RequireComplete();
    conversion_.reset();
    sae_.reset();
    checkpoint_ = SafetensorsFile::Parse(checkpoint_bytes_.data(), checkpoint_bytes_.size(), name);
  }
  void RequireStream() const {
    if (stream_ == nullptr) throw Error("nextRange and feedPiece need beginStream first");
  }
  void Free() {
    stream_.reset();
    piece_.Free();
    conversion_.reset();
    sae_.reset();
    checkpoint_.reset();
    checkpoint_bytes_.Free();
  }

  Config config_;
  bool has_config_ = false;
  std::unique_ptr<Tokenizer> tokenizer_;
  DownloadBuffer checkpoint_bytes_{"model.safetensors", "beginCheckpoint"};  // checkpoint_ points into it
  std::unique_ptr<SafetensorsFile> checkpoint_;
  std::unique_ptr<Gpt2GgufInMemory> conversion_;  // holds the output
  std::unique_ptr<Gpt2GgufStream> stream_;        // or this one does
  std::unique_ptr<SaeGgufInMemory> sae_;          // or this one (an SAE)
  SaeConfig sae_config_;
  std::string sae_cfg_json_;
  bool has_sae_config_ = false;
  DownloadBuffer piece_{"model.safetensors piece", "nextRange"};
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
