// `inflight chat-template`: renders a chat template for a conversation, to check templates
// against Python's jinja2 (tests/tokenizer/chat_template/render_jinja.py) or to inspect a prompt.
//
//   inflight chat-template (--template FILE | --model PATH) --context FILE [--now TIME]
//
// The context file is a JSON object (messages, add_generation_prompt, tools, bos_token, ...;
// "-" reads stdin); its key order is kept. The rendering goes to stdout exactly, with no newline
// added. --now pins strftime_now() ("YYYY-MM-DD" or "YYYY-MM-DDTHH:MM:SS").
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>

#include "core/check.h"
#include "formats/model_files.h"
#include "tokenizer/chat_template/chat_template.h"
#include "tools/command.h"

namespace inflight::tools {
namespace {

struct Options {
  std::string template_file;
  std::string model;
  std::string context_file;
  std::string now;
};
Options g_options;

std::string read_all(const std::string& path) {
  if (path == "-") {
    return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  std::ifstream in(path, std::ios::binary);
  INFLIGHT_CHECK_CODE(in.good(), ErrorCode::kNotFound, "cannot open '{}'", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void setup(CLI::App& app) {
  auto* tmpl = app.add_option("--template", g_options.template_file, "Jinja chat template file");
  auto* model = app.add_option("--model", g_options.model,
                               "Model (GGUF file or Hugging Face directory) whose template to use");
  tmpl->excludes(model);
  app.add_option("--context", g_options.context_file,
                 "JSON object with the template variables ('-' for stdin)")
      ->required();
  app.add_option("--now", g_options.now,
                 "Fixed time for strftime_now(): YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS");
}

int run() {
  INFLIGHT_CHECK_CODE(!g_options.template_file.empty() || !g_options.model.empty(),
                      ErrorCode::kInvalidArgument, "give --template FILE or --model PATH");
  std::string source;
  if (!g_options.template_file.empty()) {
    source = read_all(g_options.template_file);
  } else {
    source = ModelFiles::open(g_options.model)->chat_template();
    INFLIGHT_CHECK_CODE(!source.empty(), ErrorCode::kNotFound, "model '{}' has no chat template",
                        g_options.model);
  }
  nlohmann::ordered_json context;
  try {
    context = nlohmann::ordered_json::parse(read_all(g_options.context_file));
  } catch (const nlohmann::json::exception& e) {
    INFLIGHT_THROW(ErrorCode::kInvalidArgument, "context '{}' is not JSON: {}",
                   g_options.context_file, e.what());
  }
  const ChatTemplate tmpl = ChatTemplate::parse(std::move(source));
  ChatTemplateRenderOptions options;
  options.fixed_now = g_options.now;
  const std::string text = tmpl.render(context, options);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  return 0;
}

const bool kRegistered = register_command(
    {"chat-template", "Render a chat template for a conversation (JSON context)", &setup, &run});

}  // namespace
}  // namespace inflight::tools
