// ChatTemplate: a Jinja2 chat template, parsed once and rendered per request.
//
// Renders exactly as Hugging Face transformers does (jinja2 ImmutableSandboxedEnvironment with
// trim_blocks, lstrip_blocks and loop controls; tojson keeps non-ASCII; raise_exception and
// strftime_now globals; the {% generation %} tag). The supported language is the subset that
// real chat templates use; anything else is rejected at parse time, naming the construct and
// the template line.
//
//   auto tmpl = ChatTemplate::parse(model->chat_template());          // once, at load
//   std::string prompt = tmpl.render({{"messages", messages},          // per request,
//                                     {"add_generation_prompt", true},  // from any thread
//                                     {"bos_token", "<s>"}});
//
// Errors (inflight::Error):
//   parse:  kInvalidFile  malformed template (syntax error, with line)
//           kUnsupported  a valid Jinja construct this engine does not implement (with line)
//   render: kInvalidArgument  the template rejected the conversation (raise_exception) or failed
//                             on it (undefined attribute, type error, ...); the message is the
//                             template's own text or names the line, fit to return to a client.
//
// Not supported (parse or render error naming it): template inheritance and includes, recursive
// for-loops, str.format(), cycler() and lipsum(), and the filters urlize, urlencode, wordwrap,
// truncate, striptags, pprint, random, groupby, slice, filesizeformat, xmlattr. Integers are
// 64-bit (Python's are unbounded: overflow is an error here). Runaway templates are stopped:
// nesting, macro recursion, loop work and output size are bounded.
//
// NOTE: object key order is significant (tojson of tool schemas prints keys in order, as Python
// does). Pass nlohmann::ordered_json to keep a request's key order; nlohmann::json sorts keys.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace inflight {

namespace jinja {
struct Program;
}  // namespace jinja

struct ChatTemplateRenderOptions {
  // What strftime_now() sees as "now": "YYYY-MM-DD" or "YYYY-MM-DDTHH:MM:SS" (a naive local
  // time, as Python's datetime.now()). Empty: the local clock. Tests pin it for determinism.
  std::string fixed_now;
};

class ChatTemplate {
 public:
  // Throws Error(kInvalidFile / kUnsupported) naming the construct and the line.
  static ChatTemplate parse(std::string source);

  // `context` is an object: messages, add_generation_prompt, tools, bos_token, eos_token, ...
  // (any keys; they become the template's variables). Thread-safe: rendering never mutates the
  // parsed template.
  std::string render(const nlohmann::json& context) const;
  std::string render(const nlohmann::ordered_json& context) const;
  std::string render(const nlohmann::json& context, const ChatTemplateRenderOptions& options) const;
  std::string render(const nlohmann::ordered_json& context,
                     const ChatTemplateRenderOptions& options) const;

  const std::string& source() const;

 private:
  explicit ChatTemplate(std::shared_ptr<const jinja::Program> program);
  std::shared_ptr<const jinja::Program> program_;  // immutable after parse; shared by copies
};

}  // namespace inflight
