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

class HfWeights {
 public:
  static HfWeights open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  std::vector<std::string> names() const;  // sorted
  const TensorInfo* find(const std::string& name) const;
  Tensor get(const std::string& name) const;  // view in the file's dtype, from the right shard
  std::string file_of(const std::string& name) const;  // path of the file that holds `name`
  void release(const std::string& name) const;         // SafetensorsFile::release in its shard

 private:
  const SafetensorsFile& shard_for(const std::string& name) const;

  std::string dir_;
  std::vector<SafetensorsFile> shards_;
  std::map<std::string, size_t> shard_of_;  // tensor name -> index into shards_
};

}  // namespace titan::ckpt
