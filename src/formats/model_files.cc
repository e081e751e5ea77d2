#include "formats/model_files.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include "formats/gguf_model_files.h"
#include "formats/hf_model_files.h"

namespace inflight {

std::unique_ptr<ModelFiles> ModelFiles::open(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  INFLIGHT_CHECK_CODE(fs::exists(st), ErrorCode::kNotFound, "model '{}' does not exist", path);
  if (fs::is_directory(st)) return HfModelFiles::open(path);

  // Decide by content, not by name: a GGUF file starts with "GGUF".
  char magic[4] = {};
  std::ifstream in(path, std::ios::binary);
  in.read(magic, 4);
  if (in.gcount() == 4 && std::memcmp(magic, "GGUF", 4) == 0) return GgufModelFiles::open(path);
  INFLIGHT_CHECK_CODE(fs::path(path).extension() != ".safetensors", ErrorCode::kInvalidArgument,
                      "'{}' is a single safetensors file: pass the directory that holds it with "
                      "config.json",
                      path);
  INFLIGHT_THROW(ErrorCode::kInvalidFile,
                 "'{}' is neither a GGUF file nor a Hugging Face model directory", path);
}

}  // namespace inflight
