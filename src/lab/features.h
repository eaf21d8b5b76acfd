// Sparse autoencoders in the lab (issue 27): the SAEs loaded beside the model (SaeSet), what
// they read at a conversation's capture, and their steering and clamping as interventions. The
// SAE's math is src/sae/sae.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lab/conversation.h"
#include "sae/sae.h"

namespace gpt2 {

// A position's most active features, descending (zeros left out), and the share of the stream
// the SAE explains there.
struct SaeFeatureList {
  std::vector<int> features;
  std::vector<float> activations;
  double explained = 0;
};

// W_dec[F] @ W_U's k largest (promoted) and k smallest (suppressed, most negative first) tokens.
struct SaeLogitWeights {
  std::vector<int> promoted, suppressed;
  std::vector<float> promoted_values, suppressed_values;
};

// The k largest nonzero entries of f [n], descending (ties to the lower index), into ids/values.
void TopFeatures(const float* f, int n, int k, std::vector<int>* ids, std::vector<float>* values);

// One loaded SAE: its bytes (owned), the Sae bound to them, and the encoding of the captured
// stream last read (re-encoded from the first row that changed). The features are kept sparse:
// GPT-2 small's 24,576 per position would be 100 MB dense at 1024 positions, and few fire.
struct LoadedSae {
  int id = 0;
  std::vector<uint8_t> bytes;
  std::shared_ptr<const Sae> sae;
  std::vector<float> encoded_input;                        // [rows, d_in]: the stream rows encoded
  std::vector<std::vector<std::pair<int, float>>> active;  // [rows]: nonzero features, ascending
  std::vector<float> scales;                               // [rows]
  std::vector<float> dense;  // the encoder's output for a few rows, reused
  SaeScratch scratch;
};

// What the page lists of a loaded SAE: its config's names and its file's size.
struct SaeInfo {
  int id = 0, layer = 0, d_sae = 0, k = 0;
  std::string hook, point, architecture, normalize;
  double bytes = 0;
};
SaeInfo InfoOf(const LoadedSae& s);

// The SAEs loaded for a conversation's model, by id.
class SaeSet {
 public:
  // Takes the SAE GGUF's bytes (convert/sae_convert.h); returns its id. Throws unless its d_in
  // is the model's width. The conversation's capture keeps the SAE's stream from then on.
  int Load(std::vector<uint8_t> bytes, Conversation& c);
  void Drop(int id);  // later interventions may no longer name it; those set keep it alive
  LoadedSae& Find(int id);
  const LoadedSae& Find(int id) const { return const_cast<SaeSet*>(this)->Find(id); }
  std::vector<int> ids() const;  // in load order
  // The stream edit of an SAE's steering and clamping (throws for a feature out of range).
  StreamEdit Edit(const SaeIntervention& s) const;
  // iv with its sae turned into stream edits after iv.iv's own.
  LabInterventions WithEdits(LabInterventions iv) const;

 private:
  std::vector<std::unique_ptr<LoadedSae>> saes_;
  int next_id_ = 1;
};

// Read at the captured conversation as it ran (under its interventions); an SAE whose hook the
// capture does not keep has its stream captured by re-running from its block once.
SaeFeatureList SaeFeatures(Conversation& c, LoadedSae& s, int position, int k);
std::vector<float> SaeStrip(Conversation& c, LoadedSae& s, int feature);  // [captured positions]
std::vector<SaeLogitWeights> SaeLogitWeightsOf(const Model& model, const Sae& sae,
                                               const std::vector<int>& features, int k);
// The same with the product on `pool` into `scratch` (Sae::LogitWeights, over the vocabulary in
// pieces: about 16 MB however many features), for a caller asking again and again (the
// dashboards: every feature of a block, 256 at a time).
std::vector<SaeLogitWeights> SaeLogitWeightsOf(const Model& model, const Sae& sae,
                                               const std::vector<int>& features, int k,
                                               ThreadPool& pool, std::vector<float>* scratch);

}  // namespace gpt2
