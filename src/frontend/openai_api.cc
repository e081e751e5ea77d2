#include "frontend/openai_api.h"

#include "frontend/api_error.h"
#include "frontend/json_fields.h"
#include "frontend/openai_protocol.h"
#include "frontend/openai_responses.h"
#include "frontend/prompt_builder.h"
#include "frontend/structured_output_fields.h"
#include "tokenizer/tokenizer.h"

namespace inflight::frontend {

using json = nlohmann::ordered_json;

namespace {

ResponseMeta make_meta(const Frontend& frontend, std::string_view prefix) {
  return ResponseMeta{new_response_id(prefix), unix_now(), frontend.options().served_model_name,
                      frontend.system_fingerprint()};
}

// The format the calls of a chat request come in: none without tools or with tool_choice
// "none"; the forced JSON list for "required" or a named function (the grammar makes the model
// write it, whatever the template shows); else --tool-call-parser or the template's own. A
// request whose calls could not come back as calls is refused rather than answered in prose.
std::optional<ToolCallParser> tool_call_format(const Frontend& frontend,
                                               const ChatCompletionRequest& req) {
  if (req.tools.is_null() || req.tools.empty() || req.tool_choice_none) return std::nullopt;
  if (req.tool_choice_forced) return ToolCallParser::kJsonList;
  const LoadedModel& model = frontend.model();
  if (!model.template_renders_tools) {
    throw_bad_request(
        "'tools' cannot be used with tool_choice 'auto': this model's chat template does not "
        "support tools (it never shows them to the model). Start the server with "
        "--chat-template FILE, a template that renders tools, and --tool-call-parser NAME for "
        "the call format it teaches, or send tool_choice 'required' or a named function, which "
        "constrains the reply to a call",
        "tools");
  }
  const std::optional<ToolCallParser> parser = frontend.options().tool_call_parser
                                                   ? frontend.options().tool_call_parser
                                                   : model.tool_call_parser;
  if (!parser) {
    throw_bad_request(
        "'tools' cannot be used with tool_choice 'auto': the call format of this model's chat "
        "template is not known. Start the server with --tool-call-parser NAME (" +
            std::string(tool_call_parser_names()) +
            ") for the format its template teaches, or send tool_choice 'required' or a named "
            "function",
        "tools");
  }
  return parser;
}

}  // namespace

StartedGeneration start_completion(Frontend& frontend, std::string_view body) {
  const LoadedModel& model = frontend.model();
  CompletionRequest req = parse_completion_request(parse_json_object(body), model.limits);
  frontend.check_model(req.options.model);
  if (req.options.constraint) check_structured_output(*model.engine, *req.options.constraint);
  const std::optional<int32_t> prompt_logprobs = req.options.sampling.prompt_logprobs;
  if (req.echo && req.logprobs) {
    // The prompt's tokens come with their logprobs: prompt logprobs of as many alternatives.
    SamplingParams& s = req.options.sampling;
    s.prompt_logprobs = std::max(s.prompt_logprobs.value_or(0), *req.logprobs);
  }
  std::vector<Request> requests;
  CompletionFormat format;
  for (const auto& prompt : req.prompts) {
    Request r = build_engine_request(model, prompt, req.add_special_tokens, req.options.sampling);
    format.prompt_tokens.push_back(r.prompt_token_ids);
    if (req.echo) {
      format.echo.push_back(prompt.is_tokens() ? model.tokenizer->decode(r.prompt_token_ids, false)
                                               : prompt.text);
    }
    requests.push_back(std::move(r));
  }
  format.tokenizer = model.tokenizer.get();
  format.meta = make_meta(frontend, "cmpl-");
  format.n = req.options.sampling.n;
  format.logprobs = req.logprobs;
  format.prompt_logprobs = prompt_logprobs;
  format.include_usage = req.options.include_usage;

  StartedGeneration started;
  started.generation = Generation::submit(frontend, std::move(requests));
  started.n = format.n;
  started.stream = req.options.stream;
  if (started.stream) {
    started.formatter = completion_stream_formatter(std::move(format));
  } else {
    started.render = [format](GenerationResult& result) {
      return completion_response(format, result);
    };
  }
  return started;
}

StartedGeneration start_chat_completion(Frontend& frontend, std::string_view body) {
  const LoadedModel& model = frontend.model();
  ChatCompletionRequest req = parse_chat_completion_request(parse_json_object(body), model.limits);
  frontend.check_model(req.options.model);
  if (req.options.constraint) check_structured_output(*model.engine, *req.options.constraint);
  const std::optional<ToolCallParser> tool_parser = tool_call_format(frontend, req);
  ChatPromptOptions options{req.add_generation_prompt, req.continue_final_message, req.tools,
                            req.chat_template_kwargs};
  const PromptInput prompt{{}, tokenize_chat(model, req.messages, options, req.add_special_tokens)};
  Request r = build_engine_request(model, prompt, req.add_special_tokens, req.options.sampling);

  ChatFormat format;
  format.tokenizer = model.tokenizer.get();
  format.meta = make_meta(frontend, "chatcmpl-");
  format.n = req.options.sampling.n;
  format.logprobs = req.logprobs;
  format.top_logprobs = req.top_logprobs;
  format.prompt_logprobs = req.options.sampling.prompt_logprobs;
  format.include_usage = req.options.include_usage;
  format.tool_parser = tool_parser;
  if (tool_parser) format.tools = req.tools;

  std::vector<Request> requests;
  requests.push_back(std::move(r));
  StartedGeneration started;
  started.generation = Generation::submit(frontend, std::move(requests));
  started.n = format.n;
  started.stream = req.options.stream;
  if (started.stream) {
    // With prompt logprobs each choice's role chunk waits for them (its first output).
    if (!format.prompt_logprobs) {
      started.prologue = chat_stream_prologue(format, static_cast<size_t>(format.n));
    }
    started.formatter = chat_stream_formatter(format);
  } else {
    started.render = [format](GenerationResult& result) {
      return chat_completion_response(format, result);
    };
  }
  return started;
}

json model_card(const Frontend& frontend, std::string_view id) {
  const LoadedModel& model = frontend.model();
  return {{"id", id.empty() ? frontend.options().served_model_name : std::string(id)},
          {"object", "model"},
          {"created", frontend.created()},
          {"owned_by", "inflight"},
          {"root", frontend.options().served_model_name},
          {"parent", nullptr},
          {"max_model_len", model.max_model_len}};
}

json model_list(const std::vector<std::shared_ptr<Frontend>>& frontends) {
  json data = json::array();
  for (const auto& fe : frontends) {
    if (!fe->ready()) continue;
    data.push_back(model_card(*fe));
    for (const auto& alias : fe->options().aliases) data.push_back(model_card(*fe, alias));
  }
  return {{"object", "list"}, {"data", std::move(data)}};
}

}  // namespace inflight::frontend
