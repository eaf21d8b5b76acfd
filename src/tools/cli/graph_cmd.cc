// gpt2 graph: the attribution graph of [50256] + the prompt (graph/attribute.h, lab/graph.h).
//   Without --json: the replacement and completeness scores and the kept nodes by influence.
//   --json OUT.json writes circuit-tracer's graph file (graph/graph_json.h GraphJson, the writer
//   the page's engine shares):
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
#include "graph/graph_json.h"
#include "lab/graph.h"
#include "lab/graph_check.h"
#include "lab/lab.h"
#include "tools/cli/args.h"
#include "tools/cli/json_out.h"
#include "tools/common/intervention_flags.h"

namespace gpt2 {

int GraphCommand(int argc, char** argv) {
  const Args args = [&] {
    try {
      return Args(argc, argv, 2,
                  {"model", "transcoders", "prompt", "target", "no-prune", "node-threshold",
                   "edge-threshold", "max-feature-nodes", "json", "threads", "check", "clamp"},
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
  if (args.Has("max-feature-nodes") && max_nodes < 0)
    throw UsageError("--max-feature-nodes must be >= 0");
  if (!(node_threshold >= 0 && node_threshold <= 1) ||
      !(edge_threshold >= 0 && edge_threshold <= 1)) {
    throw UsageError("--node-threshold and --edge-threshold must be between 0 and 1");
  }
  if (threads < 1) throw UsageError("--threads must be >= 1");
  if (args.Has("clamp") && !args.Has("check"))
    throw UsageError("--clamp needs --check NODE_ID[,NODE_ID...]");

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
  const double build_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (args.Has("check")) {
    // --check: the node ids as the JSON and the summary name them ("L_F_P"), feature nodes only.
    std::vector<std::string> ids;
    const std::string list = args.Get("check");
    for (size_t begin = 0; begin <= list.size();) {
      const size_t end = std::min(list.find(',', begin), list.size());
      ids.push_back(list.substr(begin, end - begin));
      begin = end + 1;
    }
    std::vector<int> chosen;
    try {
      chosen = GraphFeatureNodes(g, ids);
    } catch (const Error& e) {
      throw UsageError(std::string("--check: ") + e.what());
    }
    const GraphCheck check = CheckGraph(lab.conv(), *tcs, g, chosen, static_cast<float>(clamp));
    std::printf(
        "check: %zu feature node(s) %s %g, logit %s: predicted change %.6g, exact change %.6g\n",
        chosen.size(), clamp == 0 ? "ablated to" : "clamped to", clamp,
        GraphNodeId(g, g.logit_begin()).c_str(), check.predicted, check.exact);
  }
  // Without pruning every node is kept; influence and scores are reported all the same.
  const GraphSelection sel = SelectGraph(g, node_threshold, edge_threshold, !args.Has("no-prune"));
  const PrunedGraph& pruned = sel.pruned;
  const std::vector<char>& used = sel.used;
  const int N = g.size();

  // The build time is what scripts/bench-graph.mjs divides by a prefill's.
  std::printf(
      "graph of %d tokens: %lld active features, %d feature nodes, %d logits, built in %.0f ms\n",
      g.n_pos, static_cast<long long>(g.n_active), g.n_features, g.n_logits, build_ms);
  std::printf("replacement score %.4f, completeness score %.4f\n", pruned.replacement_score,
              pruned.completeness_score);
  if (!args.Has("json")) {
    std::vector<int> order;
    for (int i = 0; i < g.logit_begin(); ++i) {
      if (used[i]) order.push_back(i);
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return pruned.influence[a] > pruned.influence[b]; });
    std::printf(
        "top nodes by influence on the logits (node_id, type, token, influence, activation):\n");
    for (size_t k = 0; k < order.size() && k < 20; ++k) {
      const GraphNode& n = g.nodes[order[k]];
      std::printf("  %-16s %-26s %-14s %.4f %s\n", GraphNodeId(g, order[k]).c_str(),
                  GraphFeatureType(n.kind),
                  ("'" + lab.tokenizer().Decode({g.ids[n.position]}) + "'").c_str(),
                  pruned.influence[order[k]],
                  n.kind == GraphNodeKind::kFeature ? std::to_string(n.activation).c_str() : "");
    }
    for (int i = g.logit_begin(); i < N; ++i) {
      std::printf("  logit %-10s '%s' p=%.4f\n", GraphNodeId(g, i).c_str(),
                  lab.tokenizer().Decode({g.nodes[i].index}).c_str(), g.nodes[i].activation);
    }
    return 0;
  }
  const std::string json = GraphJson(g, sel, lab.tokenizer());
  WriteJsonFile(args.Get("json"), [&](std::ostream& out) { out << json; });
  return 0;
}

}  // namespace gpt2
