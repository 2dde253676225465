// The weights of a Hugging Face model folder: DIR/model.safetensors, or a sharded set described by
// DIR/model.safetensors.index.json ({"weight_map": {tensor name: shard file}}). The single file
// wins when both exist, as in transformers. open() checks the index against the shards' headers
// (every listed tensor present, every present tensor listed, no tensor in two shards), so a bad
// folder fails before step 1 with one line naming the file and key.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "titan/checkpoint/safetensors.h"

namespace titan::ckpt {

// Tensors by Hugging Face name, wherever they are stored: a folder's safetensors (HfWeights) or a
// GGUF file (models/decoder/gguf_model.h). What loading a model folder's weights reads.
class TensorSource {
 public:
  virtual ~TensorSource() = default;
  virtual std::vector<std::string> names() const = 0;  // sorted
  virtual const TensorInfo* find(const std::string& name) const = 0;
  virtual Tensor get(const std::string& name) const = 0;  // a view where it can be, in the stored dtype
  virtual std::string file_of(const std::string& name) const = 0;  // the file that holds `name`
  virtual void release(const std::string& name) const = 0;         // its pages back to the kernel
};

class HfWeights : public TensorSource {
 public:
  static HfWeights open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  std::vector<std::string> names() const override;  // sorted
  const TensorInfo* find(const std::string& name) const override;
  Tensor get(const std::string& name) const override;  // view in the file's dtype, from the right shard
  std::string file_of(const std::string& name) const override;  // path of the file that holds `name`
  void release(const std::string& name) const override;         // SafetensorsFile::release in its shard

 private:
  const SafetensorsFile& shard_for(const std::string& name) const;

  std::string dir_;
  std::vector<SafetensorsFile> shards_;
  std::map<std::string, size_t> shard_of_;  // tensor name -> index into shards_
};

}  // namespace titan::ckpt
