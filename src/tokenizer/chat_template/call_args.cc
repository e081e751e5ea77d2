#include "tokenizer/chat_template/call_args.h"

#include "tokenizer/chat_template/render_error.h"

namespace inflight::jinja {

ArgParser::ArgParser(std::string_view what, const CallArgs& args,
                     std::initializer_list<std::string_view> names, std::size_t num_required)
    : bound_(names.size(), nullptr) {
  if (args.positional.size() > names.size()) {
    render_fail("{}() takes at most {} argument(s) ({} given)", what, names.size(),
                args.positional.size());
  }
  for (std::size_t i = 0; i < args.positional.size(); ++i) bound_[i] = &args.positional[i];
  for (const auto& [key, value] : args.keyword) {
    std::size_t i = 0;
    for (std::string_view n : names) {
      if (n == key) break;
      ++i;
    }
    if (i == names.size()) render_fail("{}() got an unexpected keyword argument '{}'", what, key);
    if (bound_[i] != nullptr) render_fail("{}() got multiple values for argument '{}'", what, key);
    bound_[i] = &value;
  }
  for (std::size_t i = 0; i < num_required; ++i) {
    if (bound_[i] == nullptr) {
      render_fail("{}() missing required argument '{}'", what, *(names.begin() + i));
    }
  }
}

const Value& ArgParser::get(std::size_t i) const {
  return *bound_[i];
}

}  // namespace inflight::jinja
