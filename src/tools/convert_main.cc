// gpt2-convert: Hugging Face GPT-2 checkpoint (model.safetensors + config.json + vocabulary) to a
// GGUF file llama.cpp and our engine both load. See convert/convert.h for the mapping.
//
//   gpt2-convert --input DIR --output FILE.gguf --type f32|f16|q8_0|q4_0 [--name NAME]
//   gpt2-convert --input IN.gguf --output FILE.gguf --type ...   (re-encode a GGUF:
//   convert/requantize.h) gpt2-convert --sae DIR --output S.gguf [--type ...]          (a SAELens
//   SAE: convert/sae_convert.h) gpt2-convert --transcoders DIR --output T.gguf [--type ...]
//   (per-block MLP transcoders, same file)
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "base/error.h"
#include "convert/convert.h"
#include "convert/requantize.h"
#include "convert/sae_convert.h"

namespace {

void Usage(std::ostream& out) {
  out << "usage: gpt2-convert --input DIR --output FILE.gguf [--type f32|f16|q8_0|q4_0] [--name "
         "NAME] [--quiet]\n"
         "       gpt2-convert --sae DIR --output S.gguf [--type f32|f16|q8_0|q4_0] [--quiet]\n"
         "       gpt2-convert --transcoders DIR --output T.gguf [--type f32|f16|q8_0|q4_0] "
         "[--quiet]\n"
         "  DIR holds model.safetensors, config.json and vocab.json + merges.txt\n"
         "  (or encoder.json + vocab.bpe). The default type is q8_0.\n"
         "  --input IN.gguf re-encodes a GPT-2 GGUF (e.g. F32 or F16) with --type's matrices.\n"
         "  NAME is written as general.name; by default \"GPT-2 small\" (medium, large, XL) for\n"
         "  the shapes OpenAI released, none for other shapes.\n"
         "  --sae DIR converts a SAELens sparse autoencoder (cfg.json + sae_weights.safetensors);\n"
         "  --type applies to its encoder only (decoder, biases and threshold stay f32).\n"
         "  --transcoders DIR converts every DIR/gpt2-small-dun-chl-mlp-tc{L}/ (sae.json +\n"
         "  sae.safetensors) into one file; --type applies to encoders and decoders (q8_0: GPT-2\n"
         "  small's 12 blocks in 482 MB; f32 would need 1.8 GB).\n";
}

}  // namespace

int main(int argc, char** argv) {
  std::string input, output, type = "q8_0", name, sae, transcoders;
  bool quiet = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](std::string* dst) {
      if (i + 1 >= argc) {
        std::cerr << "gpt2-convert: " << arg << " needs a value\n";
        Usage(std::cerr);
        std::exit(2);
      }
      *dst = argv[++i];
    };
    if (arg == "--input")
      value(&input);
    else if (arg == "--output")
      value(&output);
    else if (arg == "--sae")
      value(&sae);
    else if (arg == "--transcoders")
      value(&transcoders);
    else if (arg == "--type")
      value(&type);
    else if (arg == "--name")
      value(&name);
    else if (arg == "--quiet")
      quiet = true;
    else if (arg == "--help" || arg == "-h") {
      Usage(std::cout);
      return 0;
    } else {
      std::cerr << "gpt2-convert: unknown argument '" << arg << "'\n";
      Usage(std::cerr);
      return 2;
    }
  }
  if (int(!input.empty()) + int(!sae.empty()) + int(!transcoders.empty()) != 1 || output.empty()) {
    Usage(std::cerr);
    return 2;
  }
  try {
    if (!sae.empty() || !transcoders.empty()) {
      if (!name.empty()) {
        std::cerr << "gpt2-convert: --name is for GPT-2 checkpoints, not --sae or --transcoders\n";
        return 2;
      }
      if (!sae.empty())
        gpt2::ConvertSaeDir(sae, output, gpt2::ParseConvertType(type),
                            quiet ? nullptr : &std::cout);
      else
        gpt2::ConvertTranscoderDir(transcoders, output, gpt2::ParseConvertType(type),
                                   quiet ? nullptr : &std::cout);
      return 0;
    }
    const bool gguf = input.size() > 5 && input.compare(input.size() - 5, 5, ".gguf") == 0;
    if (gguf && !name.empty()) {
      std::cerr << "gpt2-convert: --name is for checkpoints; a GGUF keeps its own general.name\n";
      return 2;
    }
    if (gguf)
      gpt2::RequantizeGgufFile(input, output, gpt2::ParseConvertType(type));
    else
      gpt2::ConvertHfGpt2(input, output, gpt2::ParseConvertType(type), quiet ? nullptr : &std::cout,
                          name);
  } catch (const gpt2::Error& e) {
    std::cerr << "gpt2-convert: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "gpt2-convert: unexpected failure: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
