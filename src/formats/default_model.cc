#include "formats/default_model.h"

#include <filesystem>
#include <vector>

#include "core/check.h"
#include "core/env.h"

namespace inflight {

std::string find_default_model() {
  namespace fs = std::filesystem;
  std::vector<fs::path> dirs;
  if (!env().model_dir.empty()) dirs.emplace_back(env().model_dir);
  dirs.emplace_back(fs::current_path() / "models");
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    dirs.push_back(exe.parent_path() / ".." / "models");
    dirs.push_back(exe.parent_path() / ".." / ".." / "models");
  }
  std::string tried;
  for (const auto& d : dirs) {
    const fs::path p = d / kDefaultModelFile;
    if (fs::exists(p)) return fs::weakly_canonical(p).string();
    tried += "\n  " + p.string();
  }
  INFLIGHT_THROW(ErrorCode::kNotFound,
                 "no --model given and the default model was not found; looked at:{}\n"
                 "run scripts/fetch_model.sh or set INFLIGHT_MODEL_DIR",
                 tried);
}

}  // namespace inflight
