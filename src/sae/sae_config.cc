#include "sae/sae_config.h"

#include <cstddef>
#include <cstdint>

#include "base/error.h"
#include "format/gguf.h"
#include "format/json.h"

namespace gpt2 {

namespace {

using Kind = JsonValue::Kind;

const char kWhat[] = "SAE cfg.json";

bool IsNull(const JsonValue* v) { return v == nullptr || v->kind == Kind::kNull; }

const std::string* OptionalString(const JsonValue& root, const char* key) {
  const JsonValue* v = root.Find(key);
  if (IsNull(v)) return nullptr;
  if (v->kind != Kind::kString)
    throw Error(std::string(kWhat) + " \"" + key + "\" must be a string");
  return &v->str;
}

int PositiveInt(const JsonValue& root, const char* key) {
  const JsonValue* v = root.Find(key);
  if (IsNull(v)) throw Error(std::string(kWhat) + " has no \"" + key + "\"");
  if (v->kind != Kind::kNumber || !v->is_integer || v->integer <= 0 ||
      v->integer > (int64_t{1} << 24)) {
    throw Error(std::string(kWhat) + " \"" + key + "\" must be a positive integer (at most 2^24)");
  }
  return static_cast<int>(v->integer);
}

// The names of each enumeration, written once for cfg.json, the GGUF metadata and messages.
template <typename Enum>
struct Named {
  Enum value;
  const char* name;
};
const Named<StreamPoint> kPoints[] = {{StreamPoint::kResidPre, "resid_pre"},
                                      {StreamPoint::kResidMid, "resid_mid"},
                                      {StreamPoint::kResidPost, "resid_post"},
                                      {StreamPoint::kAttnOut, "attn_out"},
                                      {StreamPoint::kMlpOut, "mlp_out"}};
const Named<SaeArchitecture> kArchitectures[] = {{SaeArchitecture::kStandard, "standard"},
                                                 {SaeArchitecture::kJumpRelu, "jumprelu"},
                                                 {SaeArchitecture::kTopK, "topk"}};
const Named<SaeNormalize> kNormalizations[] = {{SaeNormalize::kNone, "none"},
                                               {SaeNormalize::kLayerNorm, "layer_norm"},
                                               {SaeNormalize::kBareLayerNorm, "bare_layer_norm"}};

// The value named `name` in `table` into *value; false if none is.
template <typename Enum, size_t N>
bool FromName(const Named<Enum> (&table)[N], const std::string& name, Enum* value) {
  for (const Named<Enum>& e : table) {
    if (name == e.name) {
      *value = e.value;
      return true;
    }
  }
  return false;
}

template <typename Enum, size_t N>
const char* NameOf(const Named<Enum> (&table)[N], Enum value) {
  for (const Named<Enum>& e : table) {
    if (e.value == value) return e.name;
  }
  return "?";
}

}  // namespace

void ParseSaeHook(const std::string& hook, int* layer, StreamPoint* point) {
  const std::string unsupported =
      "SAE hook '" + hook +
      "' is not supported; expected blocks.L.hook_resid_pre, hook_resid_mid, hook_resid_post, "
      "hook_attn_out or hook_mlp_out";
  const std::string prefix = "blocks.";
  if (hook.compare(0, prefix.size(), prefix) != 0) throw Error(unsupported);
  size_t i = prefix.size();
  int64_t l = 0;
  const size_t digits = i;
  while (i < hook.size() && hook[i] >= '0' && hook[i] <= '9' && i - digits < 6)
    l = l * 10 + (hook[i++] - '0');
  if (i == digits || i >= hook.size() || hook[i] != '.') throw Error(unsupported);
  const std::string rest = hook.substr(i + 1);
  if (rest.compare(0, 5, "hook_") != 0 || !FromName(kPoints, rest.substr(5), point))
    throw Error(unsupported);
  *layer = static_cast<int>(l);
}

const char* SaeStreamPointName(StreamPoint p) { return NameOf(kPoints, p); }

const char* SaeArchitectureName(SaeArchitecture a) { return NameOf(kArchitectures, a); }

const char* SaeNormalizeName(SaeNormalize n) { return NameOf(kNormalizations, n); }

SaeConfig SaeConfigFromJson(const std::string& text) {
  const JsonValue root = ParseJson(text, kWhat);
  if (root.kind != Kind::kObject) throw Error(std::string(kWhat) + " is not a JSON object");
  const JsonValue* metadata = root.Find("metadata");
  if (!IsNull(metadata) && metadata->kind != Kind::kObject) {
    throw Error(std::string(kWhat) + " \"metadata\" must be an object");
  }
  SaeConfig c;
  // The hook: SAELens 6 nests it under metadata; earlier releases keep hook_name, older ones
  // hook_point, at the top level (jbloom's Reformatted files write both).
  std::string hook;
  const std::string* candidates[3] = {
      IsNull(metadata) ? nullptr : OptionalString(*metadata, "hook_name"),
      OptionalString(root, "hook_name"), OptionalString(root, "hook_point")};
  for (const std::string* h : candidates) {
    if (h == nullptr) continue;
    if (!hook.empty() && *h != hook) {
      throw Error(std::string(kWhat) + " names two hooks, '" + hook + "' and '" + *h + "'");
    }
    hook = *h;
  }
  if (hook.empty())
    throw Error(std::string(kWhat) + " has no hook_name (nor metadata.hook_name, hook_point)");
  ParseSaeHook(hook, &c.layer, &c.point);
  c.hook_name = hook;
  for (const char* head : {"hook_head_index", "hook_point_head_index"}) {
    const JsonValue* top = root.Find(head);
    const JsonValue* nested = IsNull(metadata) ? nullptr : metadata->Find(head);
    if (!IsNull(top) || !IsNull(nested)) {
      throw Error(std::string(kWhat) + " sets " + head +
                  ": SAEs on one attention head are not supported");
    }
  }

  c.d_in = PositiveInt(root, "d_in");
  c.d_sae = PositiveInt(root, "d_sae");

  const std::string* arch = OptionalString(root, "architecture");
  if (arch != nullptr && !FromName(kArchitectures, *arch, &c.architecture)) {
    throw Error(std::string(kWhat) + " architecture \"" + *arch +
                "\" is not supported; expected standard, jumprelu or topk");
  }
  // Older standard SAEs name their activation function; only ReLU is the standard one (a TopK
  // written as activation_fn "topk" with architecture "standard" is TopK).
  for (const char* key : {"activation_fn_str", "activation_fn"}) {
    const std::string* fn = OptionalString(root, key);
    if (fn == nullptr) continue;
    if (*fn == "topk" && c.architecture == SaeArchitecture::kStandard)
      c.architecture = SaeArchitecture::kTopK;
    const bool fits = (*fn == "relu" && c.architecture != SaeArchitecture::kTopK) ||
                      (*fn == "topk" && c.architecture == SaeArchitecture::kTopK);
    if (!fits) {
      throw Error(std::string(kWhat) + " " + key + " \"" + *fn +
                  "\" is not supported with architecture " + SaeArchitectureName(c.architecture));
    }
  }
  if (c.architecture == SaeArchitecture::kTopK) {
    const JsonValue* k = root.Find("k");
    if (IsNull(k)) {
      const JsonValue* kwargs = root.Find("activation_fn_kwargs");
      if (!IsNull(kwargs) && kwargs->kind == Kind::kObject) k = kwargs->Find("k");
    }
    if (IsNull(k))
      throw Error(std::string(kWhat) +
                  " is a TopK SAE without k (top-level or activation_fn_kwargs.k)");
    if (k->kind != Kind::kNumber || !k->is_integer || k->integer < 1 || k->integer > c.d_sae) {
      throw Error(std::string(kWhat) + " TopK k must be an integer in 1.." +
                  std::to_string(c.d_sae));
    }
    c.k = static_cast<int>(k->integer);
    const JsonValue* rescale = root.Find("rescale_acts_by_decoder_norm");
    if (!IsNull(rescale) && rescale->kind == Kind::kBool && rescale->boolean) {
      throw Error(std::string(kWhat) +
                  " sets rescale_acts_by_decoder_norm, which is not supported");
    }
  }

  if (const JsonValue* b = root.Find("apply_b_dec_to_input"); !IsNull(b)) {
    if (b->kind != Kind::kBool)
      throw Error(std::string(kWhat) + " apply_b_dec_to_input must be true or false");
    c.apply_b_dec_to_input = b->boolean;
  }
  if (const JsonValue* n = root.Find("normalize_activations"); !IsNull(n)) {
    if (n->kind == Kind::kBool && !n->boolean) {
      c.normalize = SaeNormalize::kNone;
    } else if (n->kind != Kind::kString || !FromName(kNormalizations, n->str, &c.normalize)) {
      throw Error(std::string(kWhat) + " normalize_activations " +
                  (n->kind == Kind::kString ? "\"" + n->str + "\"" : std::string("of this value")) +
                  " is not supported; expected \"none\" or \"layer_norm\"");
    }
    if (c.normalize == SaeNormalize::kBareLayerNorm) {
      throw Error(std::string(kWhat) +
                  " normalize_activations \"bare_layer_norm\" is a transcoder's (--transcoders)");
    }
  }
  const std::string* reshape = OptionalString(root, "reshape_activations");
  if (reshape != nullptr && *reshape != "none") {
    throw Error(std::string(kWhat) + " reshape_activations \"" + *reshape + "\" is not supported");
  }
  return c;
}

void AddSaeMetadata(GgufWriter& w, const SaeConfig& c, const std::string& cfg_json,
                    const std::string& prefix) {
  const std::string p = prefix + ".";
  w.AddString(p + "hook_name", c.hook_name);
  w.AddString(p + "architecture", SaeArchitectureName(c.architecture));
  w.AddU32(p + "k", static_cast<uint32_t>(c.k));
  w.AddBool(p + "apply_b_dec_to_input", c.apply_b_dec_to_input);
  w.AddString(p + "normalize_activations", SaeNormalizeName(c.normalize));
  w.AddU32(p + "d_in", static_cast<uint32_t>(c.d_in));
  w.AddU32(p + "d_sae", static_cast<uint32_t>(c.d_sae));
  w.AddString(p + "cfg_json", cfg_json);
  if (c.transcoder) {
    w.AddString(p + "out_hook_name",
                "blocks." + std::to_string(c.layer) + ".hook_" + SaeStreamPointName(c.out_point));
  }
}

SaeConfig SaeConfigFromGguf(const GgufFile& f, const std::string& prefix) {
  if (prefix == "sae") {
    const GgufValue* arch = f.Find("general.architecture");
    if (arch == nullptr || arch->type != GgufValueType::kString || arch->str != "sae") {
      throw Error(
          "not an SAE GGUF (general.architecture is not \"sae\"; convert one with gpt2-convert "
          "--sae)");
    }
  }
  const std::string p = prefix + ".";
  SaeConfig c;
  c.hook_name = f.GetString(p + "hook_name");
  ParseSaeHook(c.hook_name, &c.layer, &c.point);
  c.out_point = c.point;
  const std::string a = f.GetString(p + "architecture");
  if (!FromName(kArchitectures, a, &c.architecture)) {
    throw Error("SAE GGUF " + p + "architecture \"" + a + "\" is not supported");
  }
  const GgufValue* apply = f.Find(p + "apply_b_dec_to_input");
  if (apply == nullptr || apply->type != GgufValueType::kBool)
    throw Error("SAE GGUF has no " + p + "apply_b_dec_to_input");
  c.apply_b_dec_to_input = apply->u != 0;
  const std::string n = f.GetString(p + "normalize_activations");
  if (!FromName(kNormalizations, n, &c.normalize)) {
    throw Error("SAE GGUF " + p + "normalize_activations \"" + n + "\" is not supported");
  }
  const uint32_t d_in = f.GetU32(p + "d_in"), d_sae = f.GetU32(p + "d_sae"), k = f.GetU32(p + "k");
  if (d_in < 1 || d_in > (1u << 24) || d_sae < 1 || d_sae > (1u << 24))
    throw Error("SAE GGUF d_in or d_sae out of range");
  c.d_in = static_cast<int>(d_in);
  c.d_sae = static_cast<int>(d_sae);
  if (c.architecture == SaeArchitecture::kTopK && (k < 1 || k > d_sae)) {
    throw Error("SAE GGUF sae.k must be in 1.." + std::to_string(d_sae));
  }
  c.k = c.architecture == SaeArchitecture::kTopK ? static_cast<int>(k) : 0;
  if (f.Find(p + "out_hook_name") != nullptr) {
    int out_layer = 0;
    ParseSaeHook(f.GetString(p + "out_hook_name"), &out_layer, &c.out_point);
    if (out_layer != c.layer)
      throw Error("SAE GGUF " + p + "out_hook_name is in another block than its hook_name");
    c.transcoder = true;
  }
  // Only a transcoder reads the bare LayerNorm, and a transcoder only that (the graph's frozen
  // linear model, graph/replacement.h, is written for it).
  if (c.transcoder != (c.normalize == SaeNormalize::kBareLayerNorm)) {
    throw Error("SAE GGUF " + p + "normalize_activations \"" + n + "\" does not fit " +
                (c.transcoder ? "a transcoder" : "an SAE"));
  }
  return c;
}

namespace {

// The hook keys of a transcoder's sae.json, checked only when present.
void CheckTranscoderHook(const JsonValue& root, const char* key, const std::string* accepted,
                         int n_accepted) {
  const std::string* v = OptionalString(root, key);
  if (v == nullptr) return;
  for (int i = 0; i < n_accepted; ++i) {
    if (*v == accepted[i]) return;
  }
  throw Error("transcoder sae.json " + std::string(key) + " \"" + *v + "\" is not " + accepted[0]);
}

}  // namespace

SaeConfig TranscoderConfigFromJson(const std::string& text, int layer, int d_in, int d_sae) {
  const char* what = "transcoder sae.json";
  const JsonValue root = ParseJson(text.empty() ? std::string("{}") : text, what);
  if (root.kind != Kind::kObject) throw Error(std::string(what) + " is not a JSON object");
  SaeConfig c;
  c.transcoder = true;
  c.layer = layer;
  c.point = StreamPoint::kResidMid;
  c.out_point = StreamPoint::kMlpOut;
  c.normalize = SaeNormalize::kBareLayerNorm;
  c.apply_b_dec_to_input = false;
  const std::string block = "blocks." + std::to_string(layer) + ".";
  c.hook_name = block + "hook_resid_mid";
  const std::string in_hooks[2] = {block + "ln2.hook_normalized", c.hook_name};
  const std::string out_hooks[1] = {block + "hook_mlp_out"};
  for (const char* key : {"hook_name", "hook_point"}) CheckTranscoderHook(root, key, in_hooks, 2);
  for (const char* key : {"out_hook_name", "out_hook_point"})
    CheckTranscoderHook(root, key, out_hooks, 1);
  c.d_in = d_in;
  c.d_sae = d_sae;
  for (const char* key : {"d_in", "d_out"}) {
    if (!IsNull(root.Find(key)) && PositiveInt(root, key) != d_in) {
      throw Error(std::string(what) + " \"" + key + "\" is not the weights' " +
                  std::to_string(d_in));
    }
  }
  if (!IsNull(root.Find("d_sae")) && PositiveInt(root, "d_sae") != d_sae) {
    throw Error(std::string(what) + " \"d_sae\" is not the weights' " + std::to_string(d_sae));
  }
  for (const char* key : {"architecture", "activation_fn", "activation_fn_str"}) {
    const std::string* v = OptionalString(root, key);
    if (v != nullptr && *v != "standard" && *v != "relu") {
      throw Error(std::string(what) + " " + key + " \"" + *v +
                  "\" is not supported; expected a ReLU transcoder");
    }
  }
  if (const JsonValue* b = root.Find("apply_b_dec_to_input"); !IsNull(b)) {
    if (b->kind != Kind::kBool)
      throw Error(std::string(what) + " apply_b_dec_to_input must be true or false");
    c.apply_b_dec_to_input = b->boolean;
  }
  return c;
}

}  // namespace gpt2
