#include "core/check.h"

#include <cstring>

namespace inflight::detail {

void throw_error(ErrorCode code, const char* file, int line, const std::string& msg) {
  // Keep only the path below src/ (or the basename) so messages stay short.
  const char* short_file = std::strstr(file, "src/");
  if (short_file == nullptr) short_file = file;
  throw Error(code, msg, fmt::format("{}:{}", short_file, line));
}

}  // namespace inflight::detail
