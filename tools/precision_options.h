// The options every model-loading subcommand shares for precision: --quantization and
// --kv-cache-dtype, bound to the ModelSource fields of the same names (include/inflight/config.h).
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace inflight::tools {

void add_precision_options(CLI::App& app, std::string& quantization, std::string& kv_cache_dtype);

}  // namespace inflight::tools
