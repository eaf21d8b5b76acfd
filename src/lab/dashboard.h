// Feature dashboards (issue 50): for a dictionary (a transcoder set's blocks or an SAE) and a
// corpus (lab/corpus.h), per feature what Neuronpedia's and SAEDashboard's dashboards show,
// computed here over the reader's own text. Written out by lab/dashboard_json.h.
//
// A feature's activation is what `gpt2 graph` (transcoders: Sae::Encode of
// blocks.L.hook_resid_mid, graph/replacement.cc) and `gpt2 features` (an SAE at its hook) compute:
// each window runs as [50256] + window (Session::PrefillBlocks, through the last block the
// dictionary reads, recorded by RecordActs, the stream at the dictionary's hooks only), the
// encoder reads every row, and the BOS row counts nowhere.
// Per feature, with M its largest activation over the corpus:
//   top        the `top` windows whose largest activation of the feature is highest (ties: the
//              lower window first)
//   bands      `bands` equal-width bands over (0, M]: band b holds the windows whose maximum m has
//              edge(b) < m <= edge(b + 1), edge(b) = M * b / bands in double; from each, `per_band`
//              windows drawn by BandSample (below), listed in ascending window order
//   frac_nonzero  the share of the corpus's tokens where it fires (> 0)
//   histogram  kHistogramBins bins over (0, M] cut as the bands, of its nonzero activations
//   logits     the kLogitTokens tokens its decoder promotes most and least: the decoder row .
//              W_U, lab/features.h SaeLogitWeightsOf (Sae::LogitWeights), the features panel's
//              own. Neuronpedia's pos_str and neg_str are SAEDashboard's W_dec[f] @ model.W_U on a
//              HookedTransformer loaded with fold_ln, whose W_U has ln_f's weight folded in:
//              so does ours. "No LayerNorm": the row is not normalised as ln_f would a stream.
//              TransformerLens also centres W_U: over the vocabulary (center_unembed), which
//              shifts all of a feature's values alike and leaves the tokens and their order as
//              ours, and over d_model (fold_ln's centring), which is the decoder row's mean taken
//              out, as ln_f takes any stream's: Neuronpedia's values differ from ours by a
//              shift per feature, and where a decoder row's mean is not zero, by its part too.
// A feature that never fires has no windows and an empty histogram.
//
// BandSample, the seeded draw, written out so that scripts/make_golden.py reproduces it: the n
// windows of band b of feature (layer L, index F), ascending; if n <= per_band, all of them; else
// model/sampler.h's Rng (SplitMix64) seeded with
//   seed ^ (L << 48) ^ (F << 8) ^ b      (64-bit)
// shuffles the first per_band places (partial Fisher-Yates: for i = 0 .. per_band - 1,
// j = i + Next() % (n - i), swap places i and j) and those per_band are kept, sorted ascending.
//
// State, in one pass over the corpus (the forward and the encoders run once per window): per
// block and window, the features that fire there (not at the BOS) with the positions and values
// where they do, packed (varint deltas and float32). That is about 5 bytes per nonzero activation
// and none per zero: enough to rank windows, cut bands and histograms once M is known, and give a
// chosen window's activations back without running it again. The finish goes a block at a time
// and frees each block's state when its features are out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lab/corpus.h"
#include "lab/job.h"
#include "model/acts.h"
#include "model/session.h"
#include "sae/sae.h"

namespace gpt2 {

class Tokenizer;
class TranscoderSet;

constexpr int kHistogramBins = 50;  // SAEDashboard's and Neuronpedia's
constexpr int kLogitTokens = 10;
constexpr int kMaxBands = 255;  // BandSample's seed holds b in 8 bits

struct DashboardOptions {
  int context = 128;        // tokens per window (the model's context must hold one more)
  int64_t max_tokens = -1;  // the corpus's first max_tokens tokens; < 0: all
  int top = 20;
  int bands = 5;
  int per_band = 5;
  uint64_t seed = 0;
  bool logits = true;  // the logit tables (V x d_model products per feature: for every feature
                       // of GPT-2 small's 12 blocks more arithmetic than the corpus's forward)
};

// The features of one dictionary block a dashboard reads: the Sae (a transcoder set's block, or
// an SAE) and which of its features, ascending (empty: every one).
struct DashboardBlock {
  const Sae* sae = nullptr;
  std::vector<int> features;
};
// Every block of a transcoder set, or one SAE, with all its features.
std::vector<DashboardBlock> DashboardBlocksOf(const TranscoderSet& transcoders);
std::vector<DashboardBlock> DashboardBlocksOf(const Sae& sae);

// One window of a feature's dashboard (Neuronpedia's activation record).
struct DashboardWindow {
  int64_t window = 0;         // dataIndex
  std::vector<int> ids;       // the window's tokens (no BOS)
  std::vector<float> values;  // [ids.size()] the feature's activation at each
  float max_value = 0;
  int max_index = 0;  // the first position holding max_value
  // A band's window: the band's edges and how many windows' maxima fall in it; a top window:
  // -1, -1 and the number of windows where the feature fires.
  double bin_min = -1, bin_max = -1;
  int64_t bin_contains = 0;
};

struct FeatureDashboard {
  int layer = 0, index = 0;
  double frac_nonzero = 0;
  float max = 0;                          // maxActApprox
  std::vector<int> promoted, suppressed;  // logit tables (empty without options.logits)
  std::vector<float> promoted_values, suppressed_values;
  std::vector<int64_t> histogram;  // [kHistogramBins] counts (empty for a dead feature)
  std::vector<double> bin_centres;
  std::vector<DashboardWindow> windows;  // the top windows in order, then the bands' lowest up
  int n_top = 0;                         // windows[0, n_top) are the top ones
};

// The blocks of `have` (a dictionary's blocks by layer) a request reads: `blocks` (empty: all of
// them), and of those only `features` when any are named. gpt2::Error naming a block the
// dictionary lacks or a feature outside its block or the blocks asked for.
std::vector<DashboardBlock> SelectDashboardBlocks(const std::map<int, const Sae*>& have,
                                                  std::vector<int> blocks,
                                                  const std::vector<std::pair<int, int>>& features);

// Band b in [0, bands) with edge(b) < m <= edge(b + 1), edge(b) = max * b / bands (m in (0, max]).
int DashboardBand(float m, float max, int bands);
double DashboardEdge(float max, int b, int bands);
// BandSample (above): indices into [0, n) in ascending order.
std::vector<int64_t> BandSample(uint64_t seed, int layer, int feature, int band, int64_t n,
                                int per_band);

// The dashboards as a job (job.h): the corpus is fed in pieces (Feed, then EndInput); each
// Continue() runs the next window's forward, or encodes it at the next blocks (a block of
// GPT-2 small's 24,576 features a step), while there are windows (phase "windows": done/total
// over the windows read so far), then finishes the next group of features (phase "features"), whose
// dashboards TakeFeatures() hands over. It only runs `session` (each window from position 0
// through the last block it reads, so anything that Resets the session may use it between
// steps; the caller restores what it held), its pool for the logit tables, and reads the model
// and the dictionary, which must outlive it.
class DashboardJob : public Job {
 public:
  // gpt2::Error for options out of range (context + 1 past the model's, top or per_band < 0,
  // bands outside 1..kMaxBands), a block outside the model or a feature outside its dictionary.
  DashboardJob(Session& session, const Tokenizer& tokenizer, std::vector<DashboardBlock> blocks,
               const DashboardOptions& options, CorpusFormat format,
               const std::string& corpus_name);
  ~DashboardJob() override;

  // The corpus's bytes in order (gpt2::Error for a malformed line); then EndInput().
  void Feed(const char* data, size_t size);
  void EndInput();
  // The corpus's first max_tokens are in: the rest of it need not be read.
  bool input_full() const { return windows_.full(); }
  void Continue() override;
  JobProgress progress() const override;
  // The dashboards finished since the last call, by block, then feature.
  std::vector<FeatureDashboard> TakeFeatures();

  int64_t n_windows() const { return windows_.size(); }
  int64_t n_tokens() const { return windows_.n_tokens(); }
  const CorpusWindows& windows() const { return windows_; }
  int n_features() const;  // selected, over every block
  // Bytes held for the finish (the packed activations, the windows' ids and the block being
  // finished): what issue 50 caps at 400 MB for GPT-2 small's 12 blocks over 100 k tokens.
  int64_t state_bytes() const;
  int64_t peak_state_bytes() const { return peak_state_bytes_; }

 private:
  struct Block;
  void RunModel(int64_t w);    // window w's forward, recorded into acts_
  void EncodeBlock(Block& b);  // the recorded window through b's encoder, packed
  void PrepareBlock(Block& b);
  FeatureDashboard FinishFeature(Block& b, int column);
  void FinishGroup();

  Session& session_;
  DashboardOptions options_;
  CorpusReader reader_;
  CorpusWindows windows_;
  bool input_ended_ = false;
  std::vector<std::unique_ptr<Block>> blocks_;
  Keep keep_;
  Acts acts_;
  int end_block_ = 0;         // the forward runs blocks [0, end_block_)
  std::vector<int> tokens_;   // [50256] + the window being run
  std::vector<float> dense_;  // the encoder's output for one window and block
  std::vector<uint8_t> packed_;
  std::vector<float> logits_;  // a piece of a group's logit tables (SaeLogitWeightsOf), kept
  SaeScratch scratch_;
  int64_t next_window_ = 0;
  int next_block_ = -1;     // the next block to encode of it (-1: its forward is next)
  std::vector<int> fired_;  // per column: positions where it fires in the window
  size_t finishing_ = 0;    // the block being finished
  int features_done_ = 0;
  std::vector<FeatureDashboard> finished_;
  int64_t peak_state_bytes_ = 0;
};

}  // namespace gpt2
