// Feature dashboards (lab/dashboard.h).
#include "lab/dashboard.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <utility>

#include "base/error.h"
#include "lab/features.h"
#include "model/config.h"
#include "model/sampler.h"
#include "model/top_k.h"
#include "sae/transcoders.h"
#include "tokenizer/tokenizer.h"

namespace gpt2 {

namespace {

// Features finished per step: their logit tables are one product of [256, d_model] by the
// unembedding (SaeLogitWeightsOf: over the vocabulary in pieces of about 16 MB), which reads
// and prepares W_U once for all 256 rows.
constexpr int kFeaturesPerStep = 256;
// Features encoded per step, in whole blocks (a window's forward is a step of its own).
constexpr int kEncodeWidth = 24576;

// The packed activations of one window and block (see the header): per firing column, ascending,
//   varint(column - previous column - 1),
//   per position where it fires: varint(2 * (position - previous position - 1) + more),
//                                float32 value
// with "previous" -1 at the start, more = 1 while another position of the column follows (a
// count would cost a byte per column, and many fire at only one position of a window: most of
// the bench's random transcoders' do); positions count the window's tokens from 0 (the BOS
// skipped).
void PutVarint(std::vector<uint8_t>& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<uint8_t>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<uint8_t>(v));
}

uint64_t GetVarint(const uint8_t*& p) {
  uint64_t v = 0;
  for (int shift = 0;; shift += 7) {
    const uint8_t b = *p++;
    v |= uint64_t(b & 0x7F) << shift;
    if (b < 0x80) return v;
  }
}

void PutFloat(std::vector<uint8_t>& out, float v) {
  uint8_t b[4];
  std::memcpy(b, &v, 4);
  out.insert(out.end(), b, b + 4);
}

float GetFloat(const uint8_t*& p) {
  float v;
  std::memcpy(&v, p, 4);
  p += 4;
  return v;
}

template <typename T, typename A>
int64_t BytesOf(const std::vector<T, A>& v) {
  return static_cast<int64_t>(v.capacity() * sizeof(T));
}

}  // namespace

struct DashboardJob::Block {
  const Sae* sae = nullptr;
  int layer = 0;
  Hook hook = Hook::kResidMid;
  bool all = true;                           // every feature: column j is feature j
  std::vector<int> features;                 // else column j is features[j]
  Sae::Gathered gathered;                    // and these are their encoder rows
  int width = 0;                             // columns
  std::vector<std::vector<uint8_t>> packed;  // [windows]

  // The finish's (PrepareBlock): for column j, entries [begin[j], begin[j + 1]) are the windows
  // where it fires, ascending, with its maximum there and the entry's offset in packed[window].
  bool prepared = false;
  std::vector<int64_t> begin;
  std::vector<int32_t> window;
  std::vector<float> window_max;
  std::vector<uint32_t> offset;
  std::vector<int64_t> nonzero;    // [width] tokens where it fires
  std::vector<float> max;          // [width]
  std::vector<int64_t> histogram;  // [width, kHistogramBins]
  int next_column = 0;

  int feature(int column) const { return all ? column : features[column]; }
  int64_t bytes() const {
    int64_t n = BytesOf(begin) + BytesOf(window) + BytesOf(window_max) + BytesOf(offset) +
                BytesOf(nonzero) + BytesOf(max) + BytesOf(histogram) + BytesOf(gathered.rows);
    for (const auto& p : packed) n += BytesOf(p);
    return n;
  }
  void Free() {
    std::vector<std::vector<uint8_t>>().swap(packed);
    std::vector<int64_t>().swap(begin);
    std::vector<int32_t>().swap(window);
    std::vector<float>().swap(window_max);
    std::vector<uint32_t>().swap(offset);
    std::vector<int64_t>().swap(histogram);
  }
};

std::vector<DashboardBlock> DashboardBlocksOf(const TranscoderSet& transcoders) {
  std::vector<DashboardBlock> blocks;
  for (int l : transcoders.blocks()) blocks.push_back(DashboardBlock{transcoders.block(l), {}});
  return blocks;
}

std::vector<DashboardBlock> DashboardBlocksOf(const Sae& sae) { return {DashboardBlock{&sae, {}}}; }

double DashboardEdge(float max, int b, int bands) {
  return b == bands ? double(max) : double(max) * b / bands;
}

int DashboardBand(float m, float max, int bands) {
  int b = static_cast<int>(double(m) * bands / double(max));
  b = std::min(std::max(b, 0), bands - 1);
  while (b > 0 && double(m) <= DashboardEdge(max, b, bands)) --b;
  while (b < bands - 1 && double(m) > DashboardEdge(max, b + 1, bands)) ++b;
  return b;
}

std::vector<int64_t> BandSample(uint64_t seed, int layer, int feature, int band, int64_t n,
                                int per_band) {
  std::vector<int64_t> places(static_cast<size_t>(n));
  std::iota(places.begin(), places.end(), int64_t{0});
  if (n <= per_band) return places;
  Rng rng(seed ^ (uint64_t(layer) << 48) ^ (uint64_t(feature) << 8) ^ uint64_t(band));
  for (int64_t i = 0; i < per_band; ++i) {
    const int64_t j = i + static_cast<int64_t>(rng.Next() % uint64_t(n - i));
    std::swap(places[i], places[j]);
  }
  places.resize(per_band);
  std::sort(places.begin(), places.end());
  return places;
}

DashboardJob::DashboardJob(Session& session, const Tokenizer& tokenizer,
                           std::vector<DashboardBlock> blocks, const DashboardOptions& options,
                           CorpusFormat format, const std::string& corpus_name)
    : session_(session),
      options_(options),
      reader_(format, corpus_name),
      windows_(tokenizer, std::max(options.context, 1), options.max_tokens) {
  const Config& c = session.model().config();
  if (options.context < 1 || options.context + 1 > c.n_ctx) {
    throw Error("a window of " + std::to_string(options.context) +
                " tokens does not fit the model: [50256] + the window must fit its context of " +
                std::to_string(c.n_ctx) + " (so 1.." + std::to_string(c.n_ctx - 1) + " tokens)");
  }
  if (options.top < 0) throw Error("the number of top windows must be >= 0");
  if (options.per_band < 0) throw Error("the windows per band must be >= 0");
  if (options.bands < 1 || options.bands > kMaxBands)
    throw Error("the bands must be 1.." + std::to_string(kMaxBands));
  if (blocks.empty()) throw Error("a dashboard needs a dictionary block");
  for (DashboardBlock& d : blocks) {
    if (d.sae == nullptr) throw Error("a dashboard block has no dictionary");
    const SaeConfig& sc = d.sae->config();
    if (sc.layer < 0 || sc.layer >= c.n_layer) {
      throw Error("the dictionary reads " + sc.hook_name + " but the model has blocks 0.." +
                  std::to_string(c.n_layer - 1));
    }
    auto b = std::make_unique<Block>();
    b->sae = d.sae;
    b->layer = sc.layer;
    b->hook = StreamPointHook(sc.point);
    std::sort(d.features.begin(), d.features.end());
    d.features.erase(std::unique(d.features.begin(), d.features.end()), d.features.end());
    for (int f : d.features) d.sae->CheckFeature(f);
    b->all = d.features.empty();
    b->features = std::move(d.features);
    if (!b->all) b->gathered = d.sae->Gather(b->features);
    b->width = b->all ? d.sae->d_sae() : static_cast<int>(b->features.size());
    keep_.hooks |= HookSet{b->hook};
    end_block_ = std::max(end_block_, b->layer + 1);
    blocks_.push_back(std::move(b));
  }
}

DashboardJob::~DashboardJob() = default;

int DashboardJob::n_features() const {
  int n = 0;
  for (const auto& b : blocks_) n += b->width;
  return n;
}

void DashboardJob::Feed(const char* data, size_t size) {
  if (input_ended_) throw Error("the corpus has ended: no more of it can be read");
  if (windows_.full()) return;  // the first max_tokens are in: the rest is never read
  std::vector<std::string> documents;
  reader_.Feed(data, size, &documents);
  for (const std::string& d : documents) windows_.AddDocument(d);
}

void DashboardJob::EndInput() {
  if (input_ended_) return;
  std::vector<std::string> documents;
  if (!windows_.full()) reader_.Finish(&documents);
  for (const std::string& d : documents) windows_.AddDocument(d);
  input_ended_ = true;
}

void DashboardJob::Continue() {
  if (next_window_ < windows_.size()) {
    if (next_block_ < 0) {
      RunModel(next_window_);
      next_block_ = 0;
    } else {
      // Blocks of up to kEncodeWidth features a step (at least one): a whole GPT-2-small block
      // costs a fifth of the window's forward, a graph's features in every block a few rows.
      int width = 0;
      while (next_block_ < static_cast<int>(blocks_.size()) &&
             (width == 0 || width + blocks_[next_block_]->width <= kEncodeWidth)) {
        width += blocks_[next_block_]->width;
        EncodeBlock(*blocks_[next_block_++]);
      }
      if (next_block_ == static_cast<int>(blocks_.size())) {
        next_block_ = -1;
        ++next_window_;
      }
    }
  } else if (input_ended_ && finishing_ < blocks_.size()) {
    FinishGroup();
  }
  peak_state_bytes_ = std::max(peak_state_bytes_, state_bytes());
}

JobProgress DashboardJob::progress() const {
  JobProgress p;
  if (!input_ended_ || next_window_ < windows_.size()) {
    p.phase = "windows";
    p.done = static_cast<int>(next_window_);
    p.total = static_cast<int>(windows_.size());
    return p;
  }
  p.phase = "features";
  p.done = features_done_;
  p.total = n_features();
  p.finished = finishing_ >= blocks_.size();
  return p;
}

std::vector<FeatureDashboard> DashboardJob::TakeFeatures() {
  std::vector<FeatureDashboard> out;
  out.swap(finished_);
  return out;
}

int64_t DashboardJob::state_bytes() const {
  int64_t n = BytesOf(dense_) + BytesOf(packed_) + BytesOf(logits_);
  for (const auto& b : blocks_) n += b->bytes();
  // The windows' ids (CorpusWindows: an int per token, an int64 per window).
  n += windows_.n_tokens() * int64_t(sizeof(int)) + windows_.size() * int64_t(sizeof(int64_t));
  return n;
}

void DashboardJob::RunModel(int64_t w) {
  const int n = windows_.length(w);
  tokens_.assign(1, kEndOfText);
  tokens_.insert(tokens_.end(), windows_.ids(w), windows_.ids(w) + n);
  RunOptions run;
  RecordActs(session_.model().config(), keep_, acts_, run);
  session_.Reset();
  session_.PrefillBlocks(tokens_.data(), n + 1, end_block_, run);
}

void DashboardJob::EncodeBlock(Block& b) {
  const int T = static_cast<int>(tokens_.size());
  std::vector<int>& fired = fired_;
  const int W = b.width;
  // Every row, the BOS's too, as the graph encodes them (so the activations are its own);
  // the BOS's row is then left out.
  const std::vector<float>& rows = acts_.Of(b.hook, b.layer);
  if (rows.size() != size_t(T) * session_.model().config().n_embd)
    throw Error("the run did not report " + b.sae->config().hook_name);
  const float* x = rows.data();
  dense_.resize(size_t(T) * W);
  if (b.all) {
    b.sae->Encode(x, T, dense_.data(), nullptr, scratch_);
  } else {
    b.sae->EncodeGathered(b.gathered, x, T, dense_.data(), nullptr, scratch_);
  }
  // The columns that fire somewhere, found row by row (a few thousand of 24,576 in a window of
  // GPT-2 small's), then each read down its column.
  fired.assign(W, 0);
  for (int t = 1; t < T; ++t) {
    const float* row = dense_.data() + int64_t(t) * W;
    for (int j = 0; j < W; ++j) fired[j] += row[j] > 0;
  }
  packed_.clear();
  int previous = -1;
  for (int j = 0; j < W; ++j) {
    if (fired[j] == 0) continue;
    PutVarint(packed_, uint64_t(j - previous - 1));
    previous = j;
    int last = -1, left = fired[j];
    for (int t = 1; t < T; ++t) {
      const float v = dense_[int64_t(t) * W + j];
      if (!(v > 0)) continue;
      --left;
      PutVarint(packed_, uint64_t(2 * (t - 1 - last - 1) + (left > 0 ? 1 : 0)));
      last = t - 1;
      PutFloat(packed_, v);
    }
  }
  b.packed.emplace_back(packed_.begin(), packed_.end());
}

void DashboardJob::PrepareBlock(Block& b) {
  const int W = b.width;
  const int64_t n_windows = static_cast<int64_t>(b.packed.size());
  b.begin.assign(size_t(W) + 1, 0);
  b.nonzero.assign(W, 0);
  b.max.assign(W, 0.0f);
  // Pass 1: how many windows each column fires in, its count and maximum.
  for (int64_t w = 0; w < n_windows; ++w) {
    const uint8_t* p = b.packed[w].data();
    const uint8_t* end = p + b.packed[w].size();
    int column = -1;
    while (p < end) {
      column += static_cast<int>(GetVarint(p)) + 1;
      ++b.begin[column + 1];
      for (bool more = true; more;) {
        more = (GetVarint(p) & 1) != 0;
        b.max[column] = std::max(b.max[column], GetFloat(p));
        ++b.nonzero[column];
      }
    }
  }
  for (int j = 0; j < W; ++j) b.begin[j + 1] += b.begin[j];
  const int64_t E = b.begin[W];
  b.window.resize(E);
  b.window_max.resize(E);
  b.offset.resize(E);
  b.histogram.assign(size_t(W) * kHistogramBins, 0);
  std::vector<int64_t> cursor(b.begin.begin(), b.begin.end() - 1);
  // Pass 2: the entries by column, and the histograms now that each maximum is known.
  for (int64_t w = 0; w < n_windows; ++w) {
    const uint8_t* start = b.packed[w].data();
    const uint8_t* p = start;
    const uint8_t* end = p + b.packed[w].size();
    int column = -1;
    while (p < end) {
      const uint32_t at = static_cast<uint32_t>(p - start);
      column += static_cast<int>(GetVarint(p)) + 1;
      float m = 0;
      int64_t* bins = b.histogram.data() + int64_t(column) * kHistogramBins;
      for (bool more = true; more;) {
        more = (GetVarint(p) & 1) != 0;
        const float v = GetFloat(p);
        m = std::max(m, v);
        ++bins[DashboardBand(v, b.max[column], kHistogramBins)];
      }
      const int64_t e = cursor[column]++;
      b.window[e] = static_cast<int32_t>(w);
      b.window_max[e] = m;
      b.offset[e] = at;
    }
  }
  b.prepared = true;
}

FeatureDashboard DashboardJob::FinishFeature(Block& b, int column) {
  FeatureDashboard f;
  f.layer = b.layer;
  f.index = b.feature(column);
  const int64_t e0 = b.begin[column];
  const int64_t n = b.begin[column + 1] - e0;
  f.frac_nonzero = n_tokens() > 0 ? double(b.nonzero[column]) / double(n_tokens()) : 0.0;
  f.max = b.max[column];
  if (n == 0) return f;
  const int64_t* bins = b.histogram.data() + int64_t(column) * kHistogramBins;
  f.histogram.assign(bins, bins + kHistogramBins);
  for (int i = 0; i < kHistogramBins; ++i)
    f.bin_centres.push_back(double(f.max) * (i + 0.5) / kHistogramBins);

  // Window of entry e with the feature's activation at each of its tokens.
  const auto window_of = [&](int64_t e, double bin_min, double bin_max, int64_t contains) {
    DashboardWindow d;
    d.window = b.window[e];
    const int len = windows_.length(d.window);
    d.ids.assign(windows_.ids(d.window), windows_.ids(d.window) + len);
    d.values.assign(len, 0.0f);
    const uint8_t* p = b.packed[d.window].data() + b.offset[e];
    GetVarint(p);  // the column
    int position = -1;
    for (bool more = true; more;) {
      const uint64_t step = GetVarint(p);
      more = (step & 1) != 0;
      position += static_cast<int>(step >> 1) + 1;
      d.values[position] = GetFloat(p);
    }
    d.max_value = b.window_max[e];
    d.max_index = static_cast<int>(std::find(d.values.begin(), d.values.end(), d.max_value) -
                                   d.values.begin());
    d.bin_min = bin_min;
    d.bin_max = bin_max;
    d.bin_contains = contains;
    return d;
  };

  // Entries are in window order, so KeepLargest's ties to the lower index are to the lower window.
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  KeepLargest(b.window_max.data() + e0, options_.top, &order);
  for (int i : order) f.windows.push_back(window_of(e0 + i, -1, -1, n));
  f.n_top = static_cast<int>(f.windows.size());

  const int B = options_.bands;
  std::vector<std::vector<int64_t>> members(B);
  for (int64_t i = 0; i < n; ++i)
    members[DashboardBand(b.window_max[e0 + i], f.max, B)].push_back(e0 + i);
  for (int band = 0; band < B; ++band) {
    const int64_t count = static_cast<int64_t>(members[band].size());
    for (int64_t k : BandSample(options_.seed, f.layer, f.index, band, count, options_.per_band)) {
      f.windows.push_back(window_of(members[band][k], DashboardEdge(f.max, band, B),
                                    DashboardEdge(f.max, band + 1, B), count));
    }
  }
  return f;
}

void DashboardJob::FinishGroup() {
  Block& b = *blocks_[finishing_];
  if (!b.prepared) {
    PrepareBlock(b);
    return;
  }
  const int first = b.next_column;
  const int end = std::min(b.width, first + kFeaturesPerStep);
  std::vector<int> features;
  for (int j = first; j < end; ++j) {
    finished_.push_back(FinishFeature(b, j));
    features.push_back(b.feature(j));
  }
  if (options_.logits && !features.empty()) {
    const std::vector<SaeLogitWeights> logits = SaeLogitWeightsOf(
        session_.model(), *b.sae, features, kLogitTokens, session_.pool(), &logits_);
    FeatureDashboard* out = finished_.data() + finished_.size() - features.size();
    for (size_t i = 0; i < features.size(); ++i) {
      out[i].promoted = logits[i].promoted;
      out[i].promoted_values = logits[i].promoted_values;
      out[i].suppressed = logits[i].suppressed;
      out[i].suppressed_values = logits[i].suppressed_values;
    }
  }
  features_done_ += end - first;
  b.next_column = end;
  if (end == b.width) {
    b.Free();
    if (++finishing_ == blocks_.size()) std::vector<float>().swap(logits_);
  }
}

std::vector<DashboardBlock> SelectDashboardBlocks(
    const std::map<int, const Sae*>& have, std::vector<int> blocks,
    const std::vector<std::pair<int, int>>& features) {
  if (have.empty()) throw Error("the dictionary has no block");
  const bool named_blocks = !blocks.empty();
  for (int l : blocks) {
    if (!have.count(l)) throw Error("the dictionary has no block " + std::to_string(l));
  }
  if (!named_blocks) {
    for (const auto& kv : have) blocks.push_back(kv.first);
  }
  std::sort(blocks.begin(), blocks.end());
  blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
  std::vector<DashboardBlock> out;
  if (features.empty()) {
    for (int l : blocks) out.push_back(DashboardBlock{have.at(l), {}});
    return out;
  }
  std::map<int, std::vector<int>> chosen;
  for (const auto& [l, f] : features) {
    const std::string name = std::to_string(l) + "_" + std::to_string(f);
    if (std::find(blocks.begin(), blocks.end(), l) == blocks.end()) {
      throw Error("feature " + name + " is in block " + std::to_string(l) + ", which " +
                  (named_blocks ? "the blocks asked for leave out" : "the dictionary lacks"));
    }
    try {
      have.at(l)->CheckFeature(f);
    } catch (const Error& e) {
      throw Error("feature " + name + ": " + e.what());
    }
    chosen[l].push_back(f);
  }
  for (const auto& kv : chosen) out.push_back(DashboardBlock{have.at(kv.first), kv.second});
  return out;
}

}  // namespace gpt2
