// gpt2 graph: the attribution graph of [50256] + the prompt (graph/graph.h, lab/graph.h).
//   Without --json: the replacement and completeness scores and the kept nodes by influence.
//   --json OUT.json writes circuit-tracer's graph file (its frontend/graph_models.py Model, as
//   create_graph_files writes it, so Neuronpedia's and circuit-tracer's viewers open it):
//   {"metadata": {"slug", "scan", "transcoder_list", "prompt_tokens", "prompt", "node_threshold",
//                 "replacement_score", "completeness_score"},
//    "qParams": {...}, "nodes": [{"node_id", "feature", "layer", "ctx_idx", "feature_type",
//    "token_prob", "is_target_logit", "run_idx", "reverse_ctx_idx", "jsNodeId", "clerp",
//    "influence", "activation"}], "links": [{"source", "target", "weight"}]}
//   with pruning: the kept nodes (features and errors with a kept edge, every embedding and
//   logit) and kept edges; --no-prune: every node and every nonzero edge between them.
#include "tools/cli/graph_cmd.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "format/gguf.h"
#include "lab/graph.h"
#include "lab/lab.h"
#include "tools/cli/args.h"
#include "tools/cli/json_out.h"
#include "tools/common/intervention_flags.h"

namespace gpt2 {

namespace {

const char* FeatureType(GraphNodeKind k) {
  switch (k) {
    case GraphNodeKind::kFeature: return "cross layer transcoder";
    case GraphNodeKind::kError: return "mlp reconstruction error";
    case GraphNodeKind::kEmbedding: return "embedding";
    case GraphNodeKind::kLogit: return "logit";
  }
  return "";
}

// circuit-tracer's Node fields for node i (graph_models.py: feature_node, error_node,
// token_node, logit_node).
void WriteNode(std::ostream& out, const AttributionGraph& g, int i, const PrunedGraph& pruned,
               const std::string& token) {
  const GraphNode& n = g.nodes[i];
  const std::string id = GraphNodeId(g, i);
  int feature = n.index;
  std::string layer = std::to_string(n.layer), js = id;
  if (n.kind == GraphNodeKind::kError) feature = -1;
  if (n.kind == GraphNodeKind::kEmbedding) {
    feature = n.position;
    layer = "E";
    js = "E_" + std::to_string(n.index) + "-" + std::to_string(n.position);
  }
  if (n.kind == GraphNodeKind::kFeature) js = std::to_string(n.layer) + "_" + std::to_string(n.index) + "-0";
  if (n.kind == GraphNodeKind::kError) js = std::to_string(n.layer) + "_" + std::to_string(n.position) + "-0";
  if (n.kind == GraphNodeKind::kLogit) js = "L_" + std::to_string(n.index) + "-" + std::to_string(n.position);
  out << "{\"node_id\":";
  JsonString(out, id);
  out << ",\"feature\":" << feature << ",\"layer\":";
  JsonString(out, layer);
  out << ",\"ctx_idx\":" << n.position << ",\"feature_type\":";
  JsonString(out, FeatureType(n.kind));
  const bool logit = n.kind == GraphNodeKind::kLogit;
  out << ",\"token_prob\":";
  JsonNumber(out, logit ? n.activation : 0.0);
  out << ",\"is_target_logit\":" << (logit && i == g.logit_begin() ? "true" : "false")
      << ",\"run_idx\":0,\"reverse_ctx_idx\":0,\"jsNodeId\":";
  JsonString(out, js);
  out << ",\"clerp\":";
  char p[32];
  std::snprintf(p, sizeof p, "%.3f", logit ? n.activation : 0.0);
  JsonString(out, logit ? "Output \"" + token + "\" (p=" + p + ")" : std::string());
  out << ",\"influence\":";
  if (logit) out << "null";
  else JsonNumber(out, pruned.cumulative[i]);
  out << ",\"activation\":";
  if (n.kind == GraphNodeKind::kFeature) JsonNumber(out, n.activation);
  else out << "null";
  out << "}";
}

}  // namespace

int GraphCommand(int argc, char** argv) {
  const Args args = [&] {
    try {
      return Args(argc, argv, 2,
                  {"model", "transcoders", "prompt", "target", "no-prune", "node-threshold", "edge-threshold",
                   "max-feature-nodes", "json", "threads", "check", "clamp"},
                  {"no-prune"});
    } catch (const Error& e) {
      throw UsageError(e.what());
    }
  }();
  for (const char* flag : {"model", "transcoders", "prompt"}) {
    if (!args.Has(flag)) throw UsageError(std::string("graph needs --") + flag);
  }
  long long target = -1, max_nodes = -1, threads = 0;
  double node_threshold = 0.8, edge_threshold = 0.98, clamp = 0;
  try {
    clamp = args.GetFloat("clamp", 0);
    target = args.GetInt("target", -1);
    max_nodes = args.GetInt("max-feature-nodes", -1);
    node_threshold = args.GetFloat("node-threshold", 0.8);
    edge_threshold = args.GetFloat("edge-threshold", 0.98);
    const unsigned hw = std::thread::hardware_concurrency();
    threads = args.GetInt("threads", hw == 0 ? 1 : hw);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  if (args.Has("target") && target < 0) throw UsageError("--target must be a token id");
  if (args.Has("max-feature-nodes") && max_nodes < 0) throw UsageError("--max-feature-nodes must be >= 0");
  if (!(node_threshold >= 0 && node_threshold <= 1) || !(edge_threshold >= 0 && edge_threshold <= 1)) {
    throw UsageError("--node-threshold and --edge-threshold must be between 0 and 1");
  }
  if (threads < 1) throw UsageError("--threads must be >= 1");
  if (args.Has("clamp") && !args.Has("check")) throw UsageError("--clamp needs --check NODE_ID[,NODE_ID...]");

  const std::unique_ptr<MappedFile> mapping = MappedFile::Open(args.Get("model"));
  Lab lab(LoadGguf(mapping->data(), mapping->size()), static_cast<int>(threads));
  std::shared_ptr<const TranscoderSet> tcs;
  try {
    tcs = LoadTranscoderFile(args.Get("transcoders"), lab.config());
  } catch (const Error& e) {
    throw UsageError(std::string("--transcoders: ") + e.what());
  }
  const std::string prompt_text = args.Get("prompt");
  const std::vector<int> prompt = lab.tokenizer().Encode(prompt_text);
  if (prompt.empty()) throw UsageError("--prompt: the prompt is empty");
  GraphOptions options;
  if (target >= 0) options.targets = {static_cast<int>(target)};
  options.max_feature_nodes = static_cast<int>(max_nodes);
  const auto t0 = std::chrono::steady_clock::now();
  const AttributionGraph g = AttributionGraphOf(lab.conv(), *tcs, prompt, options);
  const double build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (args.Has("check")) {
    // --check: the node ids as the JSON and the summary name them ("L_F_P"), feature nodes only.
    std::vector<int> chosen;
    std::string list = args.Get("check");
    for (size_t begin = 0; begin <= list.size();) {
      const size_t end = std::min(list.find(',', begin), list.size());
      const std::string id = list.substr(begin, end - begin);
      int found = -1;
      for (int i = 0; i < g.n_features && found < 0; ++i) {
        if (GraphNodeId(g, i) == id) found = i;
      }
      if (found < 0) throw UsageError("--check: '" + id + "' is not a feature node of this graph");
      chosen.push_back(found);
      begin = end + 1;
    }
    const GraphCheck check = CheckGraph(lab.conv(), *tcs, g, chosen, static_cast<float>(clamp));
    std::printf("check: %zu feature node(s) %s %g, logit %s: predicted change %.6g, exact change %.6g\n",
                chosen.size(), clamp == 0 ? "ablated to" : "clamped to", clamp,
                GraphNodeId(g, g.logit_begin()).c_str(), check.predicted, check.exact);
  }
  const bool prune = !args.Has("no-prune");
  // Without pruning every node is kept; influence and scores are reported all the same.
  PrunedGraph pruned = PruneAttributionGraph(g, node_threshold, edge_threshold);
  const int N = g.size();
  std::vector<char> keep_node = pruned.node_mask;
  if (!prune) keep_node.assign(N, 1);
  const auto keep_edge = [&](int t, int s) {
    const float w = g.edge(t, s);
    if (!prune) return w != 0.0f;
    return pruned.edge_mask[int64_t(t) * N + s] && keep_node[t] && keep_node[s];
  };
  // create_used_nodes_and_edges: features and errors without a kept edge are left out.
  std::vector<char> used(N, 0);
  for (int t = 0; t < N; ++t) {
    for (int s = 0; s < N; ++s) {
      if (keep_edge(t, s)) used[t] = used[s] = 1;
    }
  }
  for (int i = g.embedding_begin(); i < N; ++i) used[i] = 1;
  if (!prune) used.assign(N, 1);

  // The build time is what scripts/bench-graph.mjs divides by a prefill's.
  std::printf("graph of %d tokens: %lld active features, %d feature nodes, %d logits, built in %.0f ms\n", g.n_pos,
              static_cast<long long>(g.n_active), g.n_features, g.n_logits, build_ms);
  std::printf("replacement score %.4f, completeness score %.4f\n", pruned.replacement_score, pruned.completeness_score);
  if (!args.Has("json")) {
    std::vector<int> order;
    for (int i = 0; i < g.logit_begin(); ++i) {
      if (used[i]) order.push_back(i);
    }
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return pruned.influence[a] > pruned.influence[b]; });
    std::printf("top nodes by influence on the logits (node_id, type, token, influence, activation):\n");
    for (size_t k = 0; k < order.size() && k < 20; ++k) {
      const GraphNode& n = g.nodes[order[k]];
      std::printf("  %-16s %-26s %-14s %.4f %s\n", GraphNodeId(g, order[k]).c_str(), FeatureType(n.kind),
                  ("'" + lab.tokenizer().Decode({g.ids[n.position]}) + "'").c_str(), pruned.influence[order[k]],
                  n.kind == GraphNodeKind::kFeature ? std::to_string(n.activation).c_str() : "");
    }
    for (int i = g.logit_begin(); i < N; ++i) {
      std::printf("  logit %-10s '%s' p=%.4f\n", GraphNodeId(g, i).c_str(),
                  lab.tokenizer().Decode({g.nodes[i].index}).c_str(), g.nodes[i].activation);
    }
    return 0;
  }
  WriteJsonFile(args.Get("json"), [&](std::ostream& out) {
    out << "{\"metadata\":{\"slug\":\"gpt2-graph\",\"scan\":\"gpt2-small-dun-chl-mlp-tc\",\"transcoder_list\":[],"
           "\"prompt_tokens\":[";
    for (int p = 0; p < g.n_pos; ++p) {
      if (p) out << ",";
      JsonString(out, lab.tokenizer().Decode({g.ids[p]}));
    }
    out << "],\"prompt\":";
    JsonString(out, lab.tokenizer().Decode(g.ids));
    out << ",\"node_threshold\":";
    JsonNumber(out, node_threshold);
    out << ",\"replacement_score\":";
    JsonNumber(out, pruned.replacement_score);
    out << ",\"completeness_score\":";
    JsonNumber(out, pruned.completeness_score);
    out << "},\"qParams\":{\"pinnedIds\":[],\"supernodes\":[],\"linkType\":\"both\",\"clickedId\":\"\",\"sg_pos\":\"\"},"
           "\"nodes\":[";
    bool first = true;
    for (int i = 0; i < N; ++i) {
      if (!used[i]) continue;
      if (!first) out << ",";
      first = false;
      WriteNode(out, g, i, pruned, g.nodes[i].kind == GraphNodeKind::kLogit ? lab.tokenizer().Decode({g.nodes[i].index}) : "");
    }
    out << "],\"links\":[";
    first = true;
    for (int s = 0; s < N; ++s) {
      for (int t = 0; t < N; ++t) {
        if (!used[s] || !used[t] || !keep_edge(t, s)) continue;
        if (!first) out << ",";
        first = false;
        out << "{\"source\":";
        JsonString(out, GraphNodeId(g, s));
        out << ",\"target\":";
        JsonString(out, GraphNodeId(g, t));
        out << ",\"weight\":";
        JsonNumber(out, g.edge(t, s));
        out << "}";
      }
    }
    out << "]}\n";
  });
  return 0;
}

}  // namespace gpt2
