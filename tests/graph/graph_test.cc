// The attribution graph (graph/graph.h) and the transcoders under it against PyTorch:
// scripts/make_golden.py's write_graph() builds random transcoders of the tiny model in the public
// set's layout (tests/data/transcoders) and the graph of its prompt by float64 autograd through the
// replacement model, with circuit-tracer's pruning written anew there.
#include "graph/graph.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "../model/golden_file.h"
#include "../sae/transcoder_test_util.h"
#include "../test_paths.h"
#include "base/error.h"
#include "base/text.h"
#include "convert/convert_session.h"
#include "convert/sae_convert.h"
#include "format/gguf.h"
#include "format/safetensors.h"
#include "lab/graph.h"
#include "lab/lab.h"
#include "lab/qk.h"
#include "model/backward.h"
#include "sae/transcoders.h"
#include "tools/common/synthetic_model.h"

namespace {

using gpt2_test::Convert;
using gpt2_test::DataPath;
using gpt2_test::GoldenData;
using gpt2_test::GoldenFile;
using gpt2_test::TranscoderFiles;

const GoldenFile& Golden() { return GoldenData("golden_graph.bin"); }

struct TinyGraphLab {
  std::vector<uint8_t> bytes =
      gpt2::SyntheticModelBytes(gpt2::TinyTestConfig(), gpt2::TensorType::kF32, nullptr);
  std::unique_ptr<gpt2::Lab> lab;
  TinyGraphLab() {
    gpt2::LoadedGguf loaded;
    loaded.file = gpt2::GgufFile::Parse(bytes.data(), bytes.size());
    loaded.model = gpt2::Model::FromGguf(loaded.file);
    lab = std::make_unique<gpt2::Lab>(std::move(loaded), 2);
  }
};

std::vector<int> Prompt() {
  const std::vector<int32_t>& ids = Golden().I32("graph/ids");
  return std::vector<int>(ids.begin() + 1, ids.end());  // the lab puts the BOS first
}

}  // namespace

TEST_CASE("transcoder converter: every block under tc.L, encoder and decoder as --type",
          "[graph]") {
  TranscoderFiles files;
  const gpt2::Config config = gpt2::TinyTestConfig();
  for (gpt2::TensorType type : {gpt2::TensorType::kF32, gpt2::TensorType::kQ8_0}) {
    const auto file = Convert(files.parts, type);
    REQUIRE(file->GetString("general.architecture") == "transcoders");
    for (int l = 0; l < 2; ++l) {
      const std::string p = gpt2::TranscoderPrefix(l) + ".";
      CHECK(file->FindTensor(p + "W_enc")->type == type);
      CHECK(file->FindTensor(p + "W_dec")->type == type);
      CHECK(file->FindTensor(p + "b_enc")->type == gpt2::TensorType::kF32);
      CHECK(file->GetString(p + "hook_name") == "blocks." + std::to_string(l) + ".hook_resid_mid");
      CHECK(file->GetString(p + "out_hook_name") ==
            "blocks." + std::to_string(l) + ".hook_mlp_out");
    }
    const gpt2::TranscoderSet set(file, config);
    CHECK(set.complete());
    CHECK(set.block(1)->d_sae() == 48);
    CHECK(set.block(1)->config().normalize == gpt2::SaeNormalize::kBareLayerNorm);
  }
  // A subset of blocks is a set too.
  const auto one = Convert({files.parts[1]}, gpt2::TensorType::kF32);
  const gpt2::TranscoderSet subset(one, config);
  CHECK(subset.block(0) == nullptr);
  CHECK(subset.block(1) != nullptr);
  CHECK_FALSE(subset.complete());
  // Blocks arriving one file at a time (the page's way) make one set; a block again replaces it.
  const gpt2::TranscoderSet zero(Convert({files.parts[0]}, gpt2::TensorType::kF32), config);
  const gpt2::TranscoderSet both(zero, subset);
  CHECK(both.complete());
  CHECK(both.blocks() == std::vector<int>({0, 1}));
  CHECK(both.block(0) == zero.block(0));
  CHECK(both.block(1) == subset.block(1));
  const gpt2::TranscoderSet again(
      both, gpt2::TranscoderSet(Convert({files.parts[1]}, gpt2::TensorType::kQ8_0), config));
  CHECK(again.block(0) == zero.block(0));
  CHECK(again.block(1) != subset.block(1));
}

TEST_CASE(
    "convert session: a transcoder block as the page converts it, gpt2-convert's bytes; calls out "
    "of order say so",
    "[graph]") {
  TranscoderFiles files;
  gpt2::ConvertSession s;
  const auto* data = reinterpret_cast<const uint8_t*>(files.bytes[1].data());
  const size_t size = files.bytes[1].size();
  CHECK_THROWS_WITH(s.ConvertNext(), Catch::Contains("before plan"));
  CHECK_THROWS_WITH(s.output(), Catch::Contains("before every tensor"));
  CHECK_THROWS_WITH(s.stream(), Catch::Contains("beginStream"));
  CHECK_THROWS_WITH(s.Plan(data, size, gpt2::TensorType::kQ8_0), Catch::Contains("setConfig"));
  CHECK_THROWS_WITH(s.PlanSae(data, size, gpt2::TensorType::kQ8_0),
                    Catch::Contains("setSaeConfig"));
  // Block 1's sae.json names block 1's hooks: planned as block 0 it is refused.
  CHECK_THROWS_WITH(s.PlanTranscoder(data, size, files.json[1], 0, gpt2::TensorType::kQ8_0),
                    Catch::Contains("hook"));

  const gpt2::ConvertSession::Planned planned =
      s.PlanTranscoder(data, size, files.json[1], 1, gpt2::TensorType::kQ8_0);
  REQUIRE(planned.tensors == 4);
  CHECK_THROWS(s.output());
  while (s.ConvertNext() < planned.tensors) {
  }
  REQUIRE(s.output_size() == planned.bytes);
  const std::vector<uint8_t> got(s.output(), s.output() + s.output_size());
  const gpt2::SaeGgufConversion direct({files.parts[1]}, gpt2::TensorType::kQ8_0);
  std::vector<uint8_t> want(direct.layout().size);
  direct.WriteHeader(want.data());
  for (int i = 0; i < direct.num_tensors(); ++i) direct.EncodeTensor(i, want.data(), nullptr);
  CHECK(got == want);
  TinyGraphLab t;
  CHECK(t.lab->LoadTranscoders(got) == std::vector<int>({1}));
}

TEST_CASE("transcoder converter: bad shapes, tensors and hooks are refused, naming them",
          "[graph]") {
  TranscoderFiles files;
  // W_dec of the wrong shape: block 0's config with block 1's d_sae changed.
  gpt2::SaeGgufPart bad = files.parts[0];
  bad.config.d_sae = 40;
  CHECK_THROWS_WITH(gpt2::SaeGgufConversion({bad}, gpt2::TensorType::kF32),
                    Catch::Contains("W_enc"));
  CHECK_THROWS_WITH(
      gpt2::TranscoderConfigFromJson("{\"hook_point\": \"blocks.1.hook_resid_pre\"}", 1, 64, 48),
      Catch::Contains("hook_point"));
  CHECK_THROWS_WITH(
      gpt2::TranscoderConfigFromJson("{\"out_hook_point\": \"blocks.0.hook_mlp_out\"}", 1, 64, 48),
      Catch::Contains("out_hook_point"));
  CHECK_THROWS_WITH(gpt2::TranscoderConfigFromJson("{\"d_sae\": 12}", 1, 64, 48),
                    Catch::Contains("d_sae"));
  CHECK_THROWS_WITH(gpt2::TranscoderConfigFromJson("{\"architecture\": \"topk\"}", 1, 64, 48),
                    Catch::Contains("architecture"));
  CHECK_NOTHROW(gpt2::TranscoderConfigFromJson("", 1, 64, 48));
  // A transcoder set for a model with fewer blocks, and an SAE GGUF, are not sets of this model.
  gpt2::Config small = gpt2::TinyTestConfig();
  small.n_layer = 1;
  CHECK_THROWS_WITH(gpt2::TranscoderSet(Convert(files.parts, gpt2::TensorType::kF32), small),
                    Catch::Contains("no block"));
  // An SAE's file opened as a transcoder set.
  gpt2::GgufWriter w;
  w.AddString("general.architecture", "sae");
  const gpt2::GgufWriter::Layout layout = w.MakeLayout();
  std::vector<uint8_t> bytes(layout.header.begin(), layout.header.end());
  bytes.resize(layout.size);
  std::shared_ptr<const gpt2::GgufFile> sae(
      gpt2::GgufFile::Parse(bytes.data(), bytes.size()).release());
  CHECK_THROWS_WITH(gpt2::TranscoderSet(sae, gpt2::TinyTestConfig()),
                    Catch::Contains("not a transcoder GGUF"));
}

TEST_CASE(
    "attribution graph: every node and edge equals PyTorch autograd's; pruning keeps its nodes",
    "[graph]") {
  TranscoderFiles files;
  TinyGraphLab t;
  // The set as the page loads it, one block per file.
  const gpt2::TranscoderSet set(
      gpt2::TranscoderSet(Convert({files.parts[0]}, gpt2::TensorType::kF32), t.lab->config()),
      gpt2::TranscoderSet(Convert({files.parts[1]}, gpt2::TensorType::kF32), t.lab->config()));
  const gpt2::AttributionGraph g =
      gpt2::AttributionGraphOf(t.lab->conv(), set, Prompt(), gpt2::GraphOptions());

  const std::vector<int32_t>& features = Golden().I32("graph/features");
  const std::vector<float>& acts = Golden().F32("graph/activations");
  const int nf = static_cast<int>(acts.size());
  REQUIRE(g.n_features == nf);
  REQUIRE(g.n_active == nf);
  for (int i = 0; i < nf; ++i) {
    const gpt2::GraphNode& n = g.nodes[i];
    REQUIRE(n.kind == gpt2::GraphNodeKind::kFeature);
    CHECK(n.layer == features[3 * i]);
    CHECK(n.position == features[3 * i + 1]);
    CHECK(n.index == features[3 * i + 2]);
    CHECK(n.activation == Approx(acts[i]).epsilon(1e-4));
  }
  const std::vector<int32_t>& logit_ids = Golden().I32("graph/logit_ids");
  REQUIRE(g.n_logits == static_cast<int>(logit_ids.size()));
  for (int i = 0; i < g.n_logits; ++i) {
    CHECK(g.nodes[g.logit_begin() + i].index == logit_ids[i]);
    CHECK(g.nodes[g.logit_begin() + i].activation ==
          Approx(Golden().F32("graph/logit_probs")[i]).epsilon(1e-4));
  }
  const std::vector<float>& A = Golden().F32("graph/adjacency");
  const int N = g.size();
  REQUIRE(static_cast<size_t>(N) * N == A.size());
  // 1e-4 relative to the edge, or kEdgeFloor of the largest edge into the same target for edges
  // near zero: a float32 forward's rounding is absolute, ~1e-7 of the stream, and the edge's
  // products inherit it. WebAssembly's 4-lane sums (not AVX-512's 16) put a 3e-4 edge under a 0.55
  // row 7e-8 off PyTorch's float64, 1.3e-7 of the row: a floor of 1e-3 asked for 1e-7, float32's
  // epsilon itself; 1e-2 asks for 1e-6, a few ulps of the row's scale.
  constexpr double kEdgeFloor = 1e-2;
  double worst = 0;
  int checked = 0;
  for (int t = 0; t < N; ++t) {
    double row_max = 0;
    for (int s = 0; s < N; ++s)
      row_max = std::max(row_max, std::fabs(double(A[int64_t(t) * N + s])));
    for (int s = 0; s < N; ++s) {
      const double want = A[int64_t(t) * N + s], got = g.edge(t, s);
      const double err =
          std::fabs(got - want) / std::max(std::fabs(want), kEdgeFloor * row_max + 1e-30);
      worst = std::max(worst, err);
      if (want != 0) ++checked;
      if (err > 1e-4) {
        INFO("edge " << gpt2::GraphNodeId(g, s) << " -> " << gpt2::GraphNodeId(g, t) << ": " << got
                     << " vs " << want);
        CHECK(err <= 1e-4);
      }
    }
  }
  WARN("graph: " << checked << " nonzero edges, largest relative difference " << worst);
  CHECK(checked > 1000);

  const gpt2::PrunedGraph pruned = gpt2::PruneAttributionGraph(g);
  const std::vector<int32_t>& keep = Golden().I32("graph/node_mask");
  for (int i = 0; i < N; ++i) {
    INFO("node " << gpt2::GraphNodeId(g, i));
    CHECK(int(pruned.node_mask[i]) == keep[i]);
    CHECK(pruned.influence[i] ==
          Approx(Golden().F32("graph/influence")[i]).epsilon(1e-4).margin(1e-7));
  }
  CHECK(pruned.replacement_score == Approx(Golden().F32("graph/scores")[0]).epsilon(1e-4));
  CHECK(pruned.completeness_score == Approx(Golden().F32("graph/scores")[1]).epsilon(1e-4));
}

TEST_CASE("attribution graph: the real run under it is PyTorch's; the conversation comes back",
          "[graph]") {
  TranscoderFiles files;
  TinyGraphLab t;
  const gpt2::TranscoderSet set(Convert(files.parts, gpt2::TensorType::kF32), t.lab->config());
  t.lab->SetCapture(true);
  t.lab->Run({464, 2068});
  gpt2::AttributionGraphOf(t.lab->conv(), set, Prompt(), gpt2::GraphOptions());
  CHECK(t.lab->conv().tokens() == std::vector<int>({464, 2068}));
  // The replacement model's logits equal the real ones (make_golden.py asserts it, to 1e-9):
  // the engine's real run of the graph's ids is PyTorch's.
  std::vector<int> ids = {50256};
  for (int id : Prompt()) ids.push_back(id);
  t.lab->Reset();
  t.lab->Run(ids);
  const std::vector<float>& want = Golden().F32("graph/logits");
  const float* got = t.lab->conv().logits();
  double worst = 0;
  for (size_t v = 0; v < want.size(); ++v)
    worst = std::max(worst, double(std::fabs(got[v] - want[v])));
  CHECK(worst < 1e-4);
  // A target picks one logit node.
  gpt2::GraphOptions one;
  one.targets = {11};
  const gpt2::AttributionGraph g = gpt2::AttributionGraphOf(t.lab->conv(), set, Prompt(), one);
  CHECK(g.n_logits == 1);
  CHECK(g.nodes.back().index == 11);
  one.targets = {50257};
  CHECK_THROWS(gpt2::AttributionGraphOf(t.lab->conv(), set, Prompt(), one));
}

TEST_CASE(
    "graph check: predicted change against the frozen model's forward, exact against PyTorch's "
    "edited run",
    "[graph]") {
  TranscoderFiles files;
  TinyGraphLab t;
  const gpt2::TranscoderSet set(Convert(files.parts, gpt2::TensorType::kF32), t.lab->config());
  t.lab->Run({464, 2068});
  const gpt2::AttributionGraph g =
      gpt2::AttributionGraphOf(t.lab->conv(), set, Prompt(), gpt2::GraphOptions());
  const std::vector<int32_t>& chosen = Golden().I32("graph/check_nodes");
  const std::vector<int> nodes(chosen.begin(), chosen.end());
  const std::vector<float>& values = Golden().F32("graph/check_values");
  for (size_t i = 0; i < values.size(); ++i) {
    INFO("value " << values[i]);
    const gpt2::GraphCheck check = gpt2::CheckGraph(t.lab->conv(), set, g, nodes, values[i]);
    WARN("check at " << values[i] << ": predicted " << check.predicted << " (PyTorch "
                     << Golden().F32("graph/check_predicted")[i] << "), exact " << check.exact
                     << " (PyTorch " << Golden().F32("graph/check_exact")[i] << ")");
    CHECK(check.predicted ==
          Approx(Golden().F32("graph/check_predicted")[i]).epsilon(1e-4).margin(1e-6));
    CHECK(check.exact == Approx(Golden().F32("graph/check_exact")[i]).epsilon(1e-3).margin(1e-5));
  }
  CHECK(t.lab->conv().tokens() == std::vector<int>({464, 2068}));
  // Not a feature node, not a logit node, nothing picked, a value that is no number.
  CHECK_THROWS_WITH(gpt2::CheckGraph(t.lab->conv(), set, g, {g.error_begin()}, 0.0f),
                    Catch::Contains("not a feature node"));
  CHECK_THROWS_WITH(gpt2::CheckGraph(t.lab->conv(), set, g, nodes, 0.0f, 0),
                    Catch::Contains("not a logit node"));
  CHECK_THROWS(gpt2::CheckGraph(t.lab->conv(), set, g, {}, 0.0f));
  CHECK_THROWS(gpt2::CheckGraph(t.lab->conv(), set, g, nodes, std::nanf("")));
}

TEST_CASE(
    "graph check of a group (a supernode) by its node ids through the lab: both changes equal "
    "PyTorch's",
    "[graph]") {
  TranscoderFiles files;
  TinyGraphLab t;
  // The set as the page loads it: a GGUF's bytes into the lab.
  const gpt2::SaeGgufConversion conversion(files.parts, gpt2::TensorType::kF32);
  std::vector<uint8_t> gguf(conversion.layout().size);
  conversion.WriteHeader(gguf.data());
  for (int i = 0; i < conversion.num_tensors(); ++i)
    conversion.EncodeTensor(i, gguf.data(), nullptr);
  REQUIRE(t.lab->LoadTranscoders(gguf) == std::vector<int>({0, 1}));
  t.lab->Run({464, 2068});
  gpt2::JobProgress p = t.lab->StartGraph(Prompt(), gpt2::GraphOptions());
  while (!p.finished) p = t.lab->ContinueGraph();
  t.lab->EndJob();

  // The group's members by the ids the graph file names them by, as qParams.supernodes holds
  // them; PyTorch's feature list (the graph's node order) says which node each is.
  const std::vector<int32_t>& group = Golden().I32("graph/group_nodes");
  const std::vector<int32_t>& features = Golden().I32("graph/features");
  std::vector<std::string> ids;
  std::vector<int> layers, positions;
  for (int32_t j : group) {
    ids.push_back(std::to_string(features[3 * j]) + "_" + std::to_string(features[3 * j + 2]) +
                  "_" + std::to_string(features[3 * j + 1]));
    layers.push_back(features[3 * j]);
    positions.push_back(features[3 * j + 1]);
  }
  // What makes it a group's check and not one feature's: members in both blocks and at several
  // positions, so members feed members.
  CHECK(std::set<int>(layers.begin(), layers.end()).size() == 2);
  CHECK(std::set<int>(positions.begin(), positions.end()).size() >= 2);

  const std::vector<float>& values = Golden().F32("graph/group_values");
  for (size_t i = 0; i < values.size(); ++i) {
    INFO("group set to " << values[i]);
    const gpt2::GraphCheck check = t.lab->CheckGraph(ids, values[i]);
    WARN("group of " << ids.size() << " at " << values[i] << ": predicted " << check.predicted
                     << " (PyTorch " << Golden().F32("graph/group_predicted")[i] << "), exact "
                     << check.exact << " (PyTorch " << Golden().F32("graph/group_exact")[i] << ")");
    CHECK(check.predicted ==
          Approx(Golden().F32("graph/group_predicted")[i]).epsilon(1e-4).margin(1e-6));
    CHECK(check.exact == Approx(Golden().F32("graph/group_exact")[i]).epsilon(1e-3).margin(1e-5));
  }
  CHECK(t.lab->conv().tokens() == std::vector<int>({464, 2068}));
  // A group holding an error node: the page sends only its features; the engine names the rest.
  std::vector<std::string> with_error = ids;
  with_error.push_back("0_-1_2");
  CHECK_THROWS_WITH(t.lab->CheckGraph(with_error, 0.0f), Catch::Contains("0_-1_2"));
}

TEST_CASE(
    "graph feature card: activations over the prompt and the decoder's tokens equal PyTorch's",
    "[graph]") {
  TranscoderFiles files;
  TinyGraphLab t;
  const gpt2::TranscoderSet set(Convert(files.parts, gpt2::TensorType::kF32), t.lab->config());
  const std::vector<int32_t>& which = Golden().I32("graph/card_feature");
  const std::vector<int32_t>& ids32 = Golden().I32("graph/ids");
  const std::vector<int> ids(ids32.begin(), ids32.end());
  const gpt2::GraphFeatureCard card =
      gpt2::FeatureCardOf(t.lab->conv(), set, ids, which[0], which[1], 5);
  const std::vector<float>& acts = Golden().F32("graph/card_activations");
  REQUIRE(card.activations.size() == acts.size());
  for (size_t p = 0; p < acts.size(); ++p)
    CHECK(card.activations[p] == Approx(acts[p]).epsilon(1e-4).margin(1e-6));
  const std::vector<int32_t>& up = Golden().I32("graph/card_promoted");
  const std::vector<int32_t>& down = Golden().I32("graph/card_suppressed");
  const std::vector<float>& weights = Golden().F32("graph/card_weights");
  REQUIRE(card.promoted.size() == 5);
  for (int i = 0; i < 5; ++i) {
    CHECK(card.promoted[i] == up[i]);
    CHECK(card.suppressed[i] == down[i]);
    CHECK(card.promoted_weights[i] == Approx(weights[i]).epsilon(1e-4));
    CHECK(card.suppressed_weights[i] == Approx(weights[5 + i]).epsilon(1e-4));
  }
  CHECK_THROWS_WITH(gpt2::FeatureCardOf(t.lab->conv(), set, ids, 0, 48, 5), Catch::Contains("48"));
  CHECK_THROWS(gpt2::FeatureCardOf(t.lab->conv(), set, ids, 2, 0, 5));
}

TEST_CASE("QK attribution: every part and pair equals PyTorch's; each side sums to the real score",
          "[graph]") {
  TranscoderFiles files;
  TinyGraphLab t;
  const gpt2::TranscoderSet set(Convert(files.parts, gpt2::TensorType::kF32), t.lab->config());
  const std::vector<int32_t>& ids32 = Golden().I32("graph/ids");
  const std::vector<int> ids(ids32.begin(), ids32.end());
  const int T = static_cast<int>(ids.size()), C = t.lab->config().n_embd;
  const std::vector<int32_t>& q = Golden().I32("graph/qk_spec");
  const gpt2::ScoreSpec spec{q[0], q[1], q[2], q[3]};
  REQUIRE(spec.key < spec.query);
  const gpt2::QkAttribution all = gpt2::QkAttributionOf(t.lab->conv(), set, ids, spec, 1 << 20);

  // make_golden.py's qk_reference: the parts as (kind, layer, feature), their shares by autograd.
  CHECK(all.score == Approx(Golden().F32("graph/qk_score")[0]).epsilon(1e-4));
  const auto index = [](const std::vector<int32_t>& parts, const gpt2::QkPart& p) {
    for (size_t i = 0; 3 * i < parts.size(); ++i) {
      if (parts[3 * i] == static_cast<int>(p.kind) && parts[3 * i + 1] == p.layer &&
          parts[3 * i + 2] == p.feature) {
        return static_cast<int>(i);
      }
    }
    return -1;
  };
  const std::vector<int32_t>& qref = Golden().I32("graph/qk_query_parts");
  const std::vector<int32_t>& kref = Golden().I32("graph/qk_key_parts");
  double magnitude = 0;  // the error scale of a share: float32 products of parts this large
  for (float x : Golden().F32("graph/qk_query_shares"))
    magnitude = std::max(magnitude, double(std::fabs(x)));
  for (const auto& [parts, ref, shares] :
       {std::make_tuple(&all.query_parts, &qref, &Golden().F32("graph/qk_query_shares")),
        std::make_tuple(&all.key_parts, &kref, &Golden().F32("graph/qk_key_shares"))}) {
    REQUIRE(parts->size() * 3 == ref->size());
    for (const gpt2::QkPart& part : *parts) {
      const int i = index(*ref, part);
      INFO("part " << gpt2::QkPartKindName(part) << " " << part.layer << " " << part.feature);
      REQUIRE(i >= 0);
      CHECK(part.score == Approx((*shares)[i]).epsilon(1e-4).margin(1e-6 * magnitude));
    }
  }
  const std::vector<float>& pairs_ref = Golden().F32("graph/qk_pairs");
  const size_t nk = kref.size() / 3;
  for (const gpt2::QkPair& pair : all.pairs) {
    const int i = index(qref, all.query_parts[pair.query_part]),
              j = index(kref, all.key_parts[pair.key_part]);
    REQUIRE((i >= 0 && j >= 0));
    CHECK(pair.score == Approx(pairs_ref[i * nk + j]).epsilon(1e-4).margin(1e-6 * magnitude));
  }

  // The score from another path: the backward's kept f32 q and k; its gradient at ln_1's output.
  gpt2::Session session(t.lab->model());
  gpt2::Backward backward(t.lab->model());
  backward.Forward(session, ids, nullptr);
  const std::vector<float>& x = backward.acts().blocks[1].resid_pre;  // the stream entering block 1
  const double score = backward.Score(spec);
  std::vector<float> dln1;
  backward.RunScore(spec, [&](const gpt2::Activation& a) {
    if (a.hook == gpt2::Hook::kLn1 && a.layer == 1) dln1.assign(a.data, a.data + int64_t(T) * C);
  });
  REQUIRE(all.score == Approx(score).epsilon(1e-5));
  CHECK(all.probability > 0);
  CHECK(all.probability < 1);

  const auto sum = [](const std::vector<gpt2::QkPart>& parts, double rest) {
    double s = rest;
    for (const gpt2::QkPart& p : parts) s += p.score;
    return s;
  };
  CHECK(all.query_rest == 0);
  CHECK(all.key_rest == 0);
  CHECK(sum(all.query_parts, 0) == Approx(score).epsilon(1e-4));
  CHECK(sum(all.key_parts, 0) == Approx(score).epsilon(1e-4));
  REQUIRE(all.pairs.size() == all.query_parts.size() * all.key_parts.size());
  double pairs = 0;
  for (const gpt2::QkPair& p : all.pairs) pairs += p.score;
  CHECK(pairs == Approx(score).epsilon(1e-4));
  // Block 1's parts: the embedding, block 0's attention, features, decoder bias and error, the
  // bias.
  int features = 0;
  for (const gpt2::QkPart& p : all.query_parts) features += p.kind == gpt2::QkPartKind::kFeature;
  CHECK(all.query_parts.size() == size_t(features) + 5);

  // A feature's share on each side: acts W_dec[f] . ds/dx, ds/dx the backward's gradient at ln_1's
  // output through ln_1 with 1/sigma frozen (the replacement model's).
  const gpt2::Sae& tc = *set.block(0);
  const gpt2::BlockWeights& bw = t.lab->model().blocks[1];
  std::vector<float> dec(C);
  for (const auto& [parts, p] :
       {std::make_pair(&all.query_parts, spec.query), std::make_pair(&all.key_parts, spec.key)}) {
    const float* xp = x.data() + int64_t(p) * C;
    const float* g = dln1.data() + int64_t(p) * C;
    double mean = 0, var = 0, mg = 0;
    for (int i = 0; i < C; ++i) mean += xp[i] / C;
    for (int i = 0; i < C; ++i) var += (xp[i] - mean) * (xp[i] - mean) / C;
    for (int i = 0; i < C; ++i) mg += double(g[i]) * bw.ln1_g[i] / C;
    const double inv = 1 / std::sqrt(var + t.lab->config().ln_eps);
    int checked = 0;
    for (const gpt2::QkPart& part : *parts) {
      if (part.kind != gpt2::QkPartKind::kFeature) continue;
      tc.DecoderRowInto(part.feature, dec.data());
      double want = 0;
      for (int i = 0; i < C; ++i)
        want += part.activation * dec[i] * inv * (g[i] * bw.ln1_g[i] - mg);
      CHECK(part.score == Approx(want).epsilon(1e-4).margin(1e-6 * std::fabs(score)));
      ++checked;
    }
    CHECK(checked > 0);
  }

  // The top k: the k largest parts, the rest summed; pairs among them.
  const gpt2::QkAttribution top = gpt2::QkAttributionOf(t.lab->conv(), set, ids, spec, 3);
  REQUIRE(top.query_parts.size() == 3);
  for (int i = 0; i < 3; ++i) CHECK(top.query_parts[i].score == Approx(all.query_parts[i].score));
  CHECK(sum(top.query_parts, top.query_rest) == Approx(score).epsilon(1e-4));
  CHECK(top.pairs.size() == 3);
  CHECK(std::fabs(top.pairs[0].score) >= std::fabs(top.pairs[2].score));

  CHECK_THROWS_WITH(gpt2::QkAttributionOf(t.lab->conv(), set, ids, {1, 2, 2, 3}, 3),
                    Catch::Contains("key position 3"));
  CHECK_THROWS_WITH(gpt2::QkAttributionOf(t.lab->conv(), set, ids, {2, 0, 2, 1}, 3),
                    Catch::Contains("block 2"));
  CHECK_THROWS_WITH(gpt2::QkAttributionOf(t.lab->conv(), set, ids, {1, 9, 2, 1}, 3),
                    Catch::Contains("head 9"));
  CHECK_THROWS(gpt2::QkAttributionOf(t.lab->conv(), set, ids, spec, 0));
  gpt2::LabInterventions iv;
  iv.iv.skip_mlp = {0};
  t.lab->SetInterventions(iv, gpt2::MeansOf::kCapture);
  CHECK_THROWS_WITH(gpt2::QkAttributionOf(t.lab->conv(), set, ids, spec, 3),
                    Catch::Contains("interventions"));
}
