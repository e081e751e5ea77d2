#include "tokenizer/tokenizer_test_util.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "test_data.h"

namespace inflight::testing {

namespace fs = std::filesystem;

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string shared_file(const std::string& rel) {
  if (std::string p = data_path(rel); !p.empty()) return p;
  const std::string packed = data_path(rel + ".xz");
  if (packed.empty()) return {};
  const fs::path dir = fs::path(INFLIGHT_BINARY_DIR) / "test-data";
  fs::create_directories(dir);
  const fs::path target = dir / fs::path(rel).filename();
  if (fs::exists(target) && fs::last_write_time(target) >= fs::last_write_time(packed)) {
    return target.string();
  }
  // Unpack to a private name, then rename: test processes may race to unpack the same file.
  const fs::path tmp = dir / (target.filename().string() + ".tmp" + std::to_string(::getpid()));
  const std::string cmd = "xz -dc '" + packed + "' > '" + tmp.string() + "'";
  if (std::system(cmd.c_str()) != 0) {
    fs::remove(tmp);
    return {};
  }
  fs::rename(tmp, target);
  return target.string();
}

std::vector<TokenizerVector> read_vectors(const std::string& inp_path,
                                          const std::string& out_path) {
  const std::string inp = read_file(inp_path);
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t pos = 0; pos < inp.size();) {
    const size_t next = inp.find(sep, pos);
    if (next == std::string::npos) {
      texts.push_back(inp.substr(pos));
      break;
    }
    texts.push_back(inp.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::vector<TokenizerVector> out;
  std::istringstream lines(read_file(out_path));
  std::string line;
  for (size_t i = 0; std::getline(lines, line); ++i) {
    TokenizerVector v;
    v.text = i < texts.size() ? texts[i] : std::string();
    std::istringstream ids(line);
    for (int32_t id; ids >> id;) v.ids.push_back(id);
    out.push_back(std::move(v));
  }
  if (out.size() != texts.size()) out.clear();  // malformed pair of files: no vectors
  return out;
}

}  // namespace inflight::testing
