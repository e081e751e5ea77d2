#include "frontend/loaded_model.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/check.h"

#include "tokenizer/chat_template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace inflight::frontend {
namespace {

std::string special_text(const Tokenizer& tok, int32_t id) {
  return id == kNoToken ? std::string() : std::string(tok.token_text(id));
}

// Whether `tmpl` renders the tools of a one-message conversation: the probe function's name
// must appear. A template that fails on the probe is given the benefit of the doubt (a request's
// own rendering reports its errors).
bool renders_tools(const ChatTemplate& tmpl, const LoadedModel& model) {
  constexpr std::string_view kProbe = "inflight_probe_tool_7d1e";
  nlohmann::ordered_json context = {
      {"messages", {{{"role", "user"}, {"content", "Hi"}}}},
      {"add_generation_prompt", true},
      {"bos_token", model.bos_token},
      {"eos_token", model.eos_token},
      {"tools",
       {{{"type", "function"},
         {"function",
          {{"name", kProbe},
           {"description", "probe"},
           {"parameters",
            {{"type", "object"}, {"properties", nlohmann::ordered_json::object()}}}}}}}}};
  try {
    return tmpl.render(context).find(kProbe) != std::string::npos;
  } catch (const Error&) {
    return true;
  }
}

}  // namespace

std::shared_ptr<LoadedModel> make_loaded_model(std::shared_ptr<Engine> engine,
                                               const std::string& chat_template) {
  auto model = std::make_shared<LoadedModel>();
  model->engine = std::move(engine);
  model->tokenizer = model->engine->tokenizer();
  const std::string& tmpl = chat_template.empty() ? model->engine->chat_template() : chat_template;
  if (!tmpl.empty()) {
    model->chat_template = std::make_shared<ChatTemplate>(ChatTemplate::parse(tmpl));
    model->tool_call_parser = tool_call_parser_for_template(tmpl);
  }
  const EngineConfig& config = model->engine->config();
  model->max_model_len = config.max_model_len;
  model->limits.max_logprobs = config.max_logprobs;
  model->limits.vocab_size = model->engine->vocab_size();
  if (model->tokenizer) {
    model->bos_token = special_text(*model->tokenizer, model->tokenizer->bos_id());
    model->eos_token = special_text(*model->tokenizer, model->tokenizer->eos_id());
    model->limits.vocab_size =
        std::min<int64_t>(model->limits.vocab_size, model->tokenizer->vocab_size());
  }
  if (model->chat_template) {
    model->template_renders_tools = renders_tools(*model->chat_template, *model);
  }
  // n choices run side by side: no more than one step holds.
  model->limits.max_n = std::clamp<int32_t>(config.max_num_seqs, 1, model->limits.max_n);
  return model;
}

}  // namespace inflight::frontend
