// The page's Converter (usage at the top of embind.cc): forwards to src/convert/convert.h, which
// converts a Hugging Face GPT-2 checkpoint to GGUF one tensor per call, so the worker can report
// progress in between and hold the checkpoint only once.
#include <emscripten/bind.h>
#include <emscripten/val.h>

#include <memory>
#include <string>

#include "base/error.h"
#include "bindings/download_buffer.h"
#include "bindings/js_calls.h"
#include "convert/convert.h"
#include "format/safetensors.h"
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
  void BeginCheckpoint(double total_bytes) { Guarded([&] { Free(); checkpoint_bytes_.Begin(total_bytes); return 0; }); }
  void AppendChunk(const val& bytes) { Guarded([&] { checkpoint_bytes_.Append(bytes); return 0; }); }

  val Plan(const std::string& type) {
    return Guarded([&] {
      if (!has_config_ || tokenizer_ == nullptr) throw Error("plan needs setConfig and setVocabulary first");
      checkpoint_bytes_.RequireComplete();
      conversion_.reset();  // a second plan() replaces the first
      checkpoint_ = SafetensorsFile::Parse(checkpoint_bytes_.data(), checkpoint_bytes_.size(), "model.safetensors");
      const std::string name = Gpt2DefaultModelName(config_);
      conversion_ = std::make_unique<Gpt2GgufInMemory>(*checkpoint_, config_, tokenizer_.get(),
                                                       ParseConvertType(type), name, 2147483647u);
      return Object({{"tensors", val(conversion_->num_tensors())},
                     {"bytes", val(static_cast<double>(conversion_->size()))}, {"name", val(name)}});
    });
  }
  int ConvertNext() {
    return Guarded([&] {
      if (conversion_ == nullptr) throw Error("convertNext called before plan");
      return conversion_->ConvertNext();
    });
  }
  val TakeOutput() {
    return Guarded([&] {
      if (conversion_ == nullptr) throw Error("takeOutput called before every tensor was converted");
      const uint8_t* gguf = conversion_->output();
      // The checkpoint goes first, so the copy's transient JS memory is not on top of it.
      checkpoint_.reset();
      checkpoint_bytes_.Free();
      val out = CopyToJs(gguf, static_cast<size_t>(conversion_->size()));
      Free();
      return out;
    });
  }

 private:
  void Free() {
    conversion_.reset();
    checkpoint_.reset();
    checkpoint_bytes_.Free();
  }

  Config config_;
  bool has_config_ = false;
  std::unique_ptr<Tokenizer> tokenizer_;
  DownloadBuffer checkpoint_bytes_{"model.safetensors", "beginCheckpoint"};  // checkpoint_ points into it
  std::unique_ptr<SafetensorsFile> checkpoint_;
  std::unique_ptr<Gpt2GgufInMemory> conversion_;  // holds the output
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
      .function("convertNext", &gpt2::Converter::ConvertNext)
      .function("takeOutput", &gpt2::Converter::TakeOutput);
}
