// Sparse autoencoders in the lab (issue 27): the SAEs loaded beside the model, what they read
// at the captured conversation, and their steering and clamping as interventions. The Lab's
// methods for them are declared in lab.h and defined in features.cc; the SAE's math is
// src/sae/sae.h.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "sae/sae.h"

namespace gpt2 {

// An SAE's steering and clamping as the page and the CLI state them: (feature, alpha) added as
// alpha * W_dec[F] at every position of its hook, (feature, value) clamped (sae.h).
struct SaeIntervention {
  int id = 0;
  std::vector<std::pair<int, float>> steer;
  std::vector<std::pair<int, float>> clamp;
};

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
  std::vector<float> encoded_input;  // [rows, d_in]: the stream rows encoded
  std::vector<std::vector<std::pair<int, float>>> active;  // [rows]: nonzero features, ascending
  std::vector<float> scales;         // [rows]
  std::vector<float> dense;          // the encoder's output for a few rows, reused
  SaeScratch scratch;
};

}  // namespace gpt2
