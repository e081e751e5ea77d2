// LoadedModel: what serving one model needs once it has loaded: the engine, the tokenizer, the
// chat template, and the limits requests are validated against. Immutable once published
// (Frontend::load), so any number of threads read it without locks.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "frontend/openai_protocol.h"
#include "frontend/tool_calls.h"
#include "inflight/engine.h"

namespace inflight {
class ChatTemplate;
class Tokenizer;
}  // namespace inflight

namespace inflight::frontend {

struct LoadedModel {
  std::shared_ptr<Engine> engine;
  std::shared_ptr<const Tokenizer> tokenizer;
  std::shared_ptr<const ChatTemplate> chat_template;  // null: chat completions answer 400
  std::string bos_token;  // text of the special tokens, for the template
  std::string eos_token;
  int32_t max_model_len = 0;
  ProtocolLimits limits;
  // Special-token text written inside chat message contents ("<|im_end|>") is tokenized as
  // text, not as the special token, so a user cannot forge role boundaries; the template's own
  // markers stay special (--chat-content-special-tokens text). Off: the whole rendered prompt is
  // tokenized with special tokens parsed, as Hugging Face's apply_chat_template does.
  bool content_special_tokens_as_text = false;
  // How tool calls are found in chat outputs when the server names no --tool-call-parser: the
  // format the chat template teaches (tool_call_parser_for_template), if any.
  std::optional<ToolCallParser> tool_call_parser;
  // Whether the chat template shows a request's `tools` to the model (a probe tool's name
  // appears in a conversation rendered with it); without, tool_choice "auto" is refused.
  bool template_renders_tools = false;
};

// The LoadedModel of a started engine: `chat_template` source text, or the model's own when
// empty (no template at all: chat_template stays null); limits from the engine's effective
// config. An engine without a tokenizer (dummy weights) gets a model for token-id prompts only.
std::shared_ptr<LoadedModel> make_loaded_model(std::shared_ptr<Engine> engine,
                                               const std::string& chat_template);

}  // namespace inflight::frontend
