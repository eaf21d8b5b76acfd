#include "convert/convert_session.h"

#include <string>
#include <vector>

#include "base/error.h"
#include "format/safetensors.h"
#include "sae/transcoders.h"
#include "tokenizer/tokenizer.h"

namespace gpt2 {

ConvertSession::ConvertSession(uint64_t max_output_bytes) : max_bytes_(max_output_bytes) {}
ConvertSession::~ConvertSession() = default;

void ConvertSession::SetConfig(const std::string& json) {
  config_ = ConfigFromHfJson(json);
  has_config_ = true;
}

void ConvertSession::SetVocabulary(const std::string& vocab_json, const std::string& merges_text) {
  tokenizer_ = Tokenizer::FromText(vocab_json, merges_text, "vocab.json");
}

void ConvertSession::SetSaeConfig(const std::string& json) {
  sae_config_ = SaeConfigFromJson(json);
  sae_cfg_json_ = json;
  has_sae_config_ = true;
}

void ConvertSession::ParseCheckpoint(const uint8_t* data, size_t size, const char* name) {
  if (data == nullptr)
    throw Error(std::string(name) + " was not given (beginCheckpoint was not called)");
  Drop();
  checkpoint_ = SafetensorsFile::Parse(data, size, name);
}

ConvertSession::Planned ConvertSession::Plan(const uint8_t* checkpoint, size_t size,
                                             TensorType type) {
  if (!has_config_ || tokenizer_ == nullptr)
    throw Error("plan needs setConfig and setVocabulary first");
  ParseCheckpoint(checkpoint, size, "model.safetensors");
  const std::string name = Gpt2DefaultModelName(config_);
  conversion_ = std::make_unique<Gpt2GgufInMemory>(*checkpoint_, config_, tokenizer_.get(), type,
                                                   name, max_bytes_);
  return {conversion_->num_tensors(), conversion_->size(), name};
}

ConvertSession::Planned ConvertSession::PlanSae(const uint8_t* checkpoint, size_t size,
                                                TensorType type) {
  if (!has_sae_config_) throw Error("planSae needs setSaeConfig first");
  ParseCheckpoint(checkpoint, size, "sae_weights.safetensors");
  sae_ =
      std::make_unique<SaeGgufInMemory>(*checkpoint_, sae_config_, sae_cfg_json_, type, max_bytes_);
  return {sae_->num_tensors(), sae_->size(), ""};
}

ConvertSession::Planned ConvertSession::PlanTranscoder(const uint8_t* checkpoint, size_t size,
                                                       const std::string& sae_json, int layer,
                                                       TensorType type) {
  ParseCheckpoint(checkpoint, size, "sae.safetensors");
  const SaeGgufPart part{checkpoint_.get(), TranscoderPartConfig(*checkpoint_, sae_json, layer),
                         sae_json, TranscoderPrefix(layer)};
  sae_ = std::make_unique<SaeGgufInMemory>(std::vector<SaeGgufPart>{part}, type, max_bytes_);
  return {sae_->num_tensors(), sae_->size(), ""};
}

int ConvertSession::ConvertNext() {
  if (sae_ != nullptr) return sae_->ConvertNext();
  if (conversion_ == nullptr) throw Error("convertNext called before plan");
  return conversion_->ConvertNext();
}

ConvertSession::Planned ConvertSession::BeginStream(const uint8_t* prefix, size_t size,
                                                    uint64_t file_size, TensorType type) {
  if (!has_config_ || tokenizer_ == nullptr)
    throw Error("beginStream needs setConfig and setVocabulary first");
  Drop();
  const std::string name = Gpt2DefaultModelName(config_);
  stream_ = std::make_unique<Gpt2GgufStream>(prefix, size, file_size, config_, tokenizer_.get(),
                                             type, name, max_bytes_);
  return {stream_->num_tensors(), stream_->source_bytes(), name};
}

Gpt2GgufStream& ConvertSession::stream() {
  if (stream_ == nullptr) throw Error("nextRange and feedPiece need beginStream first");
  return *stream_;
}

const uint8_t* ConvertSession::output() const {
  if (stream_) return stream_->output();
  if (sae_) return sae_->output();
  if (conversion_) return conversion_->output();
  throw Error("takeOutput called before every tensor was converted");
}

uint64_t ConvertSession::output_size() const {
  return stream_       ? stream_->output_size()
         : sae_        ? sae_->size()
         : conversion_ ? conversion_->size()
                       : 0;
}

void ConvertSession::Drop() {
  stream_.reset();
  conversion_.reset();
  sae_.reset();
  checkpoint_.reset();
}

}  // namespace gpt2
