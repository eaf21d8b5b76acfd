// The page's converter as one object (src/bindings/converter.cc forwards each JS call here):
// what the worker downloads becomes a GGUF in memory, one tensor (or one streamed piece) per call,
// so the worker can report progress in between. Its inputs:
//   a Hugging Face GPT-2 checkpoint held whole (SetConfig, SetVocabulary, Plan) or streamed piece
//     by piece (BeginStream, then Next/Feed until done: the checkpoint is never held);
//   an SAELens SAE (SetSaeConfig, PlanSae), or one block of a transcoder set (PlanTranscoder:
//     a set of that block alone, which Lab::LoadTranscoders adds to its set).
// A held checkpoint's bytes are the caller's and must outlive the plan (null: none given; the
// plans name what else is missing first); a new plan replaces the last. Every error is a
// gpt2::Error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/memory_limit.h"
#include "convert/convert.h"
#include "convert/sae_convert.h"
#include "model/config.h"

namespace gpt2 {

class SafetensorsFile;
class Tokenizer;

class ConvertSession {
 public:
  struct Planned {
    int tensors = 0;
    uint64_t bytes =
        0;             // the output's (Plan, PlanSae, PlanTranscoder) or the source's (BeginStream)
    std::string name;  // the model's name (Plan, BeginStream)
  };

  explicit ConvertSession(uint64_t max_output_bytes = kWasmMemoryBudget);
  ~ConvertSession();
  ConvertSession(const ConvertSession&) = delete;
  ConvertSession& operator=(const ConvertSession&) = delete;

  void SetConfig(const std::string& hf_config_json);
  void SetVocabulary(const std::string& vocab_json, const std::string& merges_text);
  void SetSaeConfig(const std::string& cfg_json);

  Planned Plan(const uint8_t* checkpoint, size_t size, TensorType type);
  Planned PlanSae(const uint8_t* checkpoint, size_t size, TensorType type);
  Planned PlanTranscoder(const uint8_t* checkpoint, size_t size, const std::string& sae_json,
                         int layer, TensorType type);
  int ConvertNext();  // the tensors converted so far

  Planned BeginStream(const uint8_t* prefix, size_t size, uint64_t file_size, TensorType type);
  Gpt2GgufStream& stream();  // after BeginStream

  // The finished GGUF; throws until every tensor is converted.
  const uint8_t* output() const;
  uint64_t output_size() const;
  void Drop();  // every plan and its output

 private:
  void ParseCheckpoint(const uint8_t* data, size_t size, const char* name);

  uint64_t max_bytes_;
  Config config_;
  bool has_config_ = false;
  std::unique_ptr<Tokenizer> tokenizer_;
  SaeConfig sae_config_;
  std::string sae_cfg_json_;
  bool has_sae_config_ = false;
  std::unique_ptr<SafetensorsFile> checkpoint_;   // points into the caller's bytes
  std::unique_ptr<Gpt2GgufInMemory> conversion_;  // holds the output
  std::unique_ptr<Gpt2GgufStream> stream_;        // or this one does
  std::unique_ptr<SaeGgufInMemory> sae_;          // or this one (an SAE or a transcoder block)
};

}  // namespace gpt2
