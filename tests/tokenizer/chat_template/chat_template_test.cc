// The public API: parse once, render per request (from many threads), on real templates.
#include "tokenizer/chat_template/chat_template.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "core/check.h"
#include "formats/model_files.h"
#include "test_data.h"

namespace inflight {
namespace {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(ChatTemplateTest, KeyOrderIsKeptWithOrderedJson) {
  const auto tmpl = ChatTemplate::parse("{{ tools | tojson }}");
  const char* ctx = R"({"tools": [{"name": "f", "description": "d", "parameters": {}}]})";
  EXPECT_EQ(tmpl.render(nlohmann::ordered_json::parse(ctx)),
            R"([{"name": "f", "description": "d", "parameters": {}}])");
  // nlohmann::json sorts keys: documented in the header.
  EXPECT_EQ(tmpl.render(nlohmann::json::parse(ctx)),
            R"([{"description": "d", "name": "f", "parameters": {}}])");
}

TEST(ChatTemplateTest, StrftimeNowUsesTheFixedTime) {
  const auto tmpl =
      ChatTemplate::parse("{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%A %H:%M') }}");
  ChatTemplateRenderOptions options;
  options.fixed_now = "2024-07-26T09:05:00";
  EXPECT_EQ(tmpl.render(nlohmann::json::object(), options), "26 Jul 2024|Friday 09:05");
  options.fixed_now = "2025-01-02";
  EXPECT_EQ(tmpl.render(nlohmann::json::object(), options), "02 Jan 2025|Thursday 00:00");
  options.fixed_now = "26/07/2024";
  EXPECT_THROW(tmpl.render(nlohmann::json::object(), options), Error);
  // Without a fixed time it is today: at least it has the shape.
  EXPECT_EQ(
      ChatTemplate::parse("{{ strftime_now('%Y') | length }}").render(nlohmann::json::object()),
      "4");
}

TEST(ChatTemplateTest, ContextMustBeAnObject) {
  const auto tmpl = ChatTemplate::parse("x");
  try {
    tmpl.render(nlohmann::json::array());
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  }
}

TEST(ChatTemplateTest, CopiesShareTheParsedTemplate) {
  const auto a = ChatTemplate::parse("{{ x }}");
  const ChatTemplate b = a;  // NOLINT(performance-unnecessary-copy-initialization)
  EXPECT_EQ(&a.source(), &b.source());
  EXPECT_EQ(b.render(nlohmann::json{{"x", 1}}), "1");
}

TEST(ChatTemplateTest, RendersConcurrentlyFromManyThreads) {
  INFLIGHT_REQUIRE_DATA(path, "chat-templates/meta-llama-Llama-3.1-8B-Instruct.jinja");
  const auto tmpl = ChatTemplate::parse(read_file(path));
  auto context = [](int i) {
    return nlohmann::json{{"messages",
                           {{{"role", "system"}, {"content", "Be brief."}},
                            {{"role", "user"}, {"content", "Question " + std::to_string(i)}}}},
                          {"add_generation_prompt", true},
                          {"bos_token", "<|begin_of_text|>"}};
  };
  ChatTemplateRenderOptions options;
  options.fixed_now = "2024-07-26";
  std::vector<std::string> expected;
  for (int i = 0; i < 8; ++i) expected.push_back(tmpl.render(context(i), options));
  EXPECT_NE(expected[3].find("Question 3"), std::string::npos);
  EXPECT_NE(expected[3].find("Today Date: 26 Jul 2024"), std::string::npos);
  std::vector<std::thread> threads;
  std::vector<int> mismatches(8, 0);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 50; ++round) {
        const int i = (t + round) % 8;
        if (tmpl.render(context(i), options) != expected[i]) ++mismatches[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

TEST(ChatTemplateTest, EveryRealTemplateParses) {
  INFLIGHT_REQUIRE_DATA(dir, "chat-templates");
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".jinja") continue;
    ++count;
    EXPECT_NO_THROW(ChatTemplate::parse(read_file(entry.path()))) << entry.path();
  }
  EXPECT_EQ(count, 60);
}

TEST(ChatTemplateTest, RealTemplateRendersAConversation) {
  INFLIGHT_REQUIRE_DATA(path, "chat-templates/Qwen-Qwen2.5-7B-Instruct.jinja");
  const auto tmpl = ChatTemplate::parse(read_file(path));
  const auto ctx = nlohmann::ordered_json::parse(R"({
    "messages": [{"role": "user", "content": "Grüße 🌍"},
                 {"role": "assistant", "content": "Hallo!"},
                 {"role": "user", "content": "Wie geht's?"}],
    "add_generation_prompt": true})");
  EXPECT_EQ(tmpl.render(ctx),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
            "assistant.<|im_end|>\n<|im_start|>user\nGrüße 🌍<|im_end|>\n<|im_start|>assistant\n"
            "Hallo!<|im_end|>\n<|im_start|>user\nWie geht's?<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, TemplateThatRejectsARoleRaises) {
  INFLIGHT_REQUIRE_DATA(path, "chat-templates/mistralai-Mistral-Nemo-Instruct-2407.jinja");
  const auto tmpl = ChatTemplate::parse(read_file(path));
  const auto ctx = nlohmann::json::parse(R"({"messages": [
      {"role": "user", "content": "a"}, {"role": "user", "content": "b"}]})");
  try {
    tmpl.render(ctx);
    FAIL() << "expected the template to reject two user turns in a row";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("raised an error: After the optional system message"),
              std::string::npos)
        << e.what();
  }
}

TEST(ChatTemplateTest, DefaultModelTemplate) {
  INFLIGHT_REQUIRE_MODEL(model);
  const auto tmpl = ChatTemplate::parse(ModelFiles::open(model)->chat_template());
  EXPECT_EQ(
      tmpl.render(nlohmann::json::parse(
          R"({"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": true})")),
      "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
      "Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(tmpl.render(nlohmann::json::parse(R"({"messages": [
                {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello!"}], "add_generation_prompt": false})")),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n");
}

}  // namespace
}  // namespace inflight
