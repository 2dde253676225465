// hf_reexport IN OUT [float32|bfloat16] [max_shard_bytes]: loads the Hugging Face folder IN
// (load_hf_model) and writes it back with save_hf_folder to OUT, tokenizer files included. The
// import -> export half of tools/check_hf_roundtrip.py (which then compares OUT under Transformers
// with `titan forward`).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "titan/core/error.h"
#include "titan/models/decoder/hf_checkpoint.h"
#include "titan/models/decoder/weights.h"

int main(int argc, char** argv) {
  if (argc < 3 || argc > 5) {
    std::fprintf(stderr, "usage: %s IN_DIR OUT_DIR [float32|bfloat16] [max_shard_bytes]\n", argv[0]);
    return 2;
  }
  try {
    titan::models::HfExportOptions options;
    options.tokenizer_dir = argv[1];
    options.architecture = titan::models::hf_architecture(argv[1]);
    if (argc > 3) options.dtype = argv[3];
    if (argc > 4) options.max_shard_bytes = std::strtoll(argv[4], nullptr, 10);
    const auto model = titan::models::load_hf_model(argv[1]);
    titan::models::save_hf_folder(*model, argv[2], options);
    std::printf("exported %s -> %s (%s)\n", argv[1], argv[2], options.dtype.c_str());
  } catch (const titan::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
