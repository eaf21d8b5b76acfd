// circuit-tracer's graph.py over an AttributionGraph (graph.h): normalize_matrix,
// compute_influence, find_threshold, prune_graph and compute_graph_scores, read again in its
// graph.py on 2026-12-05; and the graph's predicted change of a logit.
#include "graph/graph.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <string>

#include "base/error.h"

namespace gpt2 {

namespace {

// circuit-tracer's normalize_matrix: |A| with each row divided by its sum (at least 1e-10).
std::vector<double> Normalized(const std::vector<float>& a, int N) {
  std::vector<double> m(a.size());
  for (int t = 0; t < N; ++t) {
    double s = 0;
    for (int j = 0; j < N; ++j) s += std::fabs(a[int64_t(t) * N + j]);
    s = std::max(s, 1e-10);
    for (int j = 0; j < N; ++j) m[int64_t(t) * N + j] = std::fabs(a[int64_t(t) * N + j]) / s;
  }
  return m;
}

// circuit-tracer's compute_influence: w A + w A^2 + ... until it vanishes (A is a DAG's).
std::vector<double> Influence(const std::vector<double>& m, const std::vector<double>& w, int N) {
  std::vector<double> cur(N, 0.0), infl(N, 0.0), next(N);
  cur = w;
  for (int iter = 0; iter <= 1000; ++iter) {
    std::fill(next.begin(), next.end(), 0.0);
    for (int t = 0; t < N; ++t) {
      if (cur[t] == 0) continue;
      for (int j = 0; j < N; ++j) next[j] += cur[t] * m[int64_t(t) * N + j];
    }
    bool any = false;
    for (int j = 0; j < N; ++j) any = any || next[j] != 0;
    if (!any) return infl;
    for (int j = 0; j < N; ++j) infl[j] += next[j];
    cur.swap(next);
  }
  throw Error("graph: influence did not converge");
}

// circuit-tracer's find_threshold: the score where the descending cumulative share first reaches
// `threshold` (torch.searchsorted's left side), the last one past the end.
double FindThreshold(std::vector<double> scores, double threshold) {
  std::sort(scores.begin(), scores.end(), std::greater<double>());
  double total = 0;
  for (double s : scores) total += s;
  double cum = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    cum += scores[i];
    if (cum / total >= threshold) return scores[i];
  }
  return scores.back();
}

}  // namespace

PrunedGraph PruneAttributionGraph(const AttributionGraph& g, double node_threshold,
                                  double edge_threshold) {
  if (!(node_threshold >= 0 && node_threshold <= 1) ||
      !(edge_threshold >= 0 && edge_threshold <= 1)) {
    throw Error("graph: thresholds must be between 0 and 1");
  }
  const int N = g.size(), n_feat = g.n_features;
  const int keep_from = g.embedding_begin();  // embeddings and logits are always kept
  std::vector<double> w(N, 0.0);
  for (int i = 0; i < g.n_logits; ++i)
    w[g.logit_begin() + i] = g.nodes[g.logit_begin() + i].activation;
  PrunedGraph out;
  const std::vector<double> m = Normalized(g.adjacency, N);
  out.influence = Influence(m, w, N);
  const double node_cut = FindThreshold(out.influence, node_threshold);
  out.node_mask.assign(N, 0);
  for (int i = 0; i < N; ++i) out.node_mask[i] = out.influence[i] >= node_cut || i >= keep_from;

  std::vector<float> pruned(g.adjacency);
  for (int t = 0; t < N; ++t) {
    for (int s = 0; s < N; ++s) {
      if (!out.node_mask[t] || !out.node_mask[s]) pruned[int64_t(t) * N + s] = 0.0f;
    }
  }
  const std::vector<double> pm = Normalized(pruned, N);
  std::vector<double> pinfl = Influence(pm, w, N);
  for (int i = 0; i < N; ++i) pinfl[i] += w[i];
  std::vector<double> edge_scores(int64_t(N) * N);
  for (int t = 0; t < N; ++t) {
    for (int s = 0; s < N; ++s) edge_scores[int64_t(t) * N + s] = pm[int64_t(t) * N + s] * pinfl[t];
  }
  const double edge_cut = FindThreshold(edge_scores, edge_threshold);
  out.edge_mask.assign(int64_t(N) * N, 0);
  for (int64_t i = 0; i < int64_t(N) * N; ++i) out.edge_mask[i] = edge_scores[i] >= edge_cut;

  // Features and errors need an edge out, features one in; repeated until nothing changes.
  for (bool first = true;; first = false) {
    const std::vector<char> old = out.node_mask;
    if (!first) {
      for (int t = 0; t < N; ++t) {
        for (int s = 0; s < N; ++s) {
          if (!out.node_mask[t] || !out.node_mask[s]) out.edge_mask[int64_t(t) * N + s] = 0;
        }
      }
    }
    for (int s = 0; s < keep_from; ++s) {
      bool out_edge = false;
      for (int t = 0; t < N && !out_edge; ++t) out_edge = out.edge_mask[int64_t(t) * N + s] != 0;
      out.node_mask[s] = out.node_mask[s] && out_edge;
    }
    for (int t = 0; t < n_feat; ++t) {
      bool in_edge = false;
      for (int s = 0; s < N && !in_edge; ++s) in_edge = out.edge_mask[int64_t(t) * N + s] != 0;
      out.node_mask[t] = out.node_mask[t] && in_edge;
    }
    if (old == out.node_mask) break;
  }

  // cumulative_scores: each node's share of the total influence, summed down the descending order.
  std::vector<int> order(N);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return out.influence[a] > out.influence[b]; });
  double total = 0;
  for (double x : out.influence) total += x;
  out.cumulative.assign(N, 0.0);
  double cum = 0;
  for (int i : order) {
    cum += out.influence[i];
    out.cumulative[i] = total > 0 ? cum / total : 0;
  }

  // circuit-tracer's compute_graph_scores (read again in its graph.py on 2026-12-05, as were the
  // pruning and find_threshold above): replacement = embeddings' influence / (embeddings' +
  // errors'); completeness = the share of each node's normalised inputs not from errors, weighted
  // by its influence plus its logit weight.
  double token_infl = 0, error_infl = 0;
  for (int i = g.error_begin(); i < g.embedding_begin(); ++i) error_infl += out.influence[i];
  for (int i = g.embedding_begin(); i < g.logit_begin(); ++i) token_infl += out.influence[i];
  out.replacement_score = token_infl + error_infl > 0 ? token_infl / (token_infl + error_infl) : 0;
  double num = 0, den = 0;
  for (int t = 0; t < N; ++t) {
    double from_errors = 0;
    for (int s = g.error_begin(); s < g.embedding_begin(); ++s)
      from_errors += m[int64_t(t) * N + s];
    const double weight = out.influence[t] + w[t];
    num += (1 - from_errors) * weight;
    den += weight;
  }
  out.completeness_score = den > 0 ? num / den : 0;
  return out;
}

double PredictedLogitChange(const AttributionGraph& g, const std::vector<int>& chosen, float value,
                            int logit) {
  if (logit < g.logit_begin() || logit >= g.size()) {
    throw Error("graph: node " + std::to_string(logit) + " is not a logit node (" +
                std::to_string(g.logit_begin()) + ".." + std::to_string(g.size() - 1) + ")");
  }
  const int nf = g.n_features;
  std::vector<char> fixed(nf, 0);
  for (int i : chosen) {
    if (i < 0 || i >= nf) {
      throw Error("graph: node " + std::to_string(i) + " is not a feature node (0.." +
                  std::to_string(nf - 1) + ")");
    }
    fixed[i] = 1;
  }
  // Feature nodes are in block order and an edge only runs from a lower block to a higher one,
  // so one pass in node order sees every source's change before its targets.
  std::vector<double> delta(nf, 0.0);
  const auto carried = [&](int t) {
    double d = 0;
    for (int s = 0; s < nf; ++s) {
      if (delta[s] != 0) d += double(g.edge(t, s)) * delta[s] / g.nodes[s].activation;
    }
    return d;
  };
  for (int t = 0; t < nf; ++t)
    delta[t] = fixed[t] ? double(value) - g.nodes[t].activation : carried(t);
  return carried(logit);
}

}  // namespace gpt2
