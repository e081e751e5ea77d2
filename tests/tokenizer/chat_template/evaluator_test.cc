// The evaluator through the public API, on constructs whose jinja2 output is known (each
// expectation was checked against jinja2 3.1 with transformers' settings).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>

#include "core/check.h"
#include "tokenizer/chat_template/chat_template.h"

namespace inflight {
namespace {

std::string render(const std::string& source, const char* context_json = "{}") {
  return ChatTemplate::parse(source).render(nlohmann::ordered_json::parse(context_json));
}

// Renders expecting an error; returns its message.
std::string render_error(const std::string& source, const char* context_json = "{}") {
  try {
    const std::string out = render(source, context_json);
    ADD_FAILURE() << "rendered without error: " << out;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    return e.what();
  }
  return {};
}

TEST(JinjaEvaluatorTest, PythonValueRendering) {
  EXPECT_EQ(
      render("{{ true }} {{ none }} {{ 1.0 }} {{ 7 / 2 }} {{ [1, 'a', none] }} {{ {'k': (1,)} }}"),
      "True None 1.0 3.5 [1, 'a', None] {'k': (1,)}");
  EXPECT_EQ(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 'ab' * 2 }}"),
            "3 -4 2 1024 abab");
  EXPECT_EQ(render("{{ x }}", R"({"x": {"b": [1, 2.5, null, true], "a": "\u00e9"}})"),
            "{'b': [1, 2.5, None, True], 'a': 'é'}");
}

TEST(JinjaEvaluatorTest, LoopVariables) {
  EXPECT_EQ(render("{% for x in 'abc' %}{{ loop.index }}{{ loop.first }}{{ loop.last }}"
                   "{{ loop.revindex0 }}{{ loop.length }}|{% endfor %}"),
            "1TrueFalse23|2FalseFalse13|3FalseTrue03|");
  EXPECT_EQ(
      render(
          "{% for x in [1, 2, 3] %}{{ loop.previtem }}<{{ x }}>{{ loop.nextitem }};{% endfor %}"),
      "<1>2;1<2>3;2<3>;");
  EXPECT_EQ(render("{% for x in range(10) if x is even %}{{ x }}@{{ loop.index }} {% endfor %}"),
            "0@1 2@2 4@3 6@4 8@5 ");
  EXPECT_EQ(render("{% for x in [] %}a{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for i in range(9) %}{% if i == 1 %}{% continue %}{% endif %}"
                   "{% if i == 4 %}{% break %}{% endif %}{{ i }}{% endfor %}"),
            "023");
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }} {% endfor %}",
                   R"({"d": {"z": 1, "a": 2}})"),
            "z=1 a=2 ");  // insertion order, as Python dicts
}

TEST(JinjaEvaluatorTest, ScopingFollowsJinja2) {
  // A set inside a loop is local to the iteration; namespace() carries state out.
  EXPECT_EQ(
      render("{% set x = 0 %}{% for i in range(3) %}{% set x = x + 1 %}{{ x }}{% endfor %}{{ x }}"),
      "1110");
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}"
                   "{% endfor %}{{ ns.n }}"),
            "3");
  // if-blocks do not create a scope.
  EXPECT_EQ(render("{% if true %}{% set y = 5 %}{% endif %}{{ y }}"), "5");
  // Macros see the defining scope at call time.
  EXPECT_EQ(render("{% set g = 1 %}{% macro m() %}{{ g }}{% endmacro %}{% set g = 2 %}{{ m() }}"),
            "2");
}

TEST(JinjaEvaluatorTest, Macros) {
  EXPECT_EQ(render("{% macro m(a, b='B', c=a ~ '!') %}{{ a }}{{ b }}{{ c }}{% endmacro %}"
                   "{{ m('x') }} {{ m('x', c='C') }} {{ m(b=1, a=2) }}"),
            "xBx! xBC 212!");
  EXPECT_EQ(
      render(
          "{% macro m(a) %}[{{ a }}|{{ varargs }}|{{ kwargs }}]{% endmacro %}{{ m(1, 2, k=3) }}"),
      "[1|(2,)|{'k': 3}]");
  EXPECT_EQ(render("{% macro w() %}<{{ caller() }}>{% endmacro %}{% call w() %}in{% endcall %}"),
            "<in>");
  EXPECT_NE(
      render_error("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}").find("takes not more than 1"),
      std::string::npos);
  EXPECT_NE(render_error("{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}")
                .find("maximum recursion depth"),
            std::string::npos);
}

TEST(JinjaEvaluatorTest, UndefinedLikeJinja2Default) {
  EXPECT_EQ(render("[{{ missing }}][{{ missing | default('d') }}][{{ missing is defined }}]"
                   "[{{ missing | length }}][{{ d.nokey }}][{{ none.attr }}]",
                   R"({"d": {}})"),
            "[][d][False][0][][]");
  // Using an undefined (attribute, arithmetic, call) is an error naming it and the line.
  EXPECT_NE(render_error("line1\n{{ missing.attr }}").find("line 2: 'missing' is undefined"),
            std::string::npos);
  EXPECT_NE(render_error("{{ d.a.b }}", R"({"d": {}})").find("'dict object' has no attribute 'a'"),
            std::string::npos);
  EXPECT_NE(render_error("{{ missing + 1 }}").find("'missing' is undefined"), std::string::npos);
}

TEST(JinjaEvaluatorTest, SandboxRefusesMutation) {
  EXPECT_NE(render_error("{% set l = [] %}{% set _ = l.append(1) %}").find("unsafe"),
            std::string::npos);
  EXPECT_NE(render_error("{% set d = {} %}{{ d.update({'a': 1}) }}").find("unsafe"),
            std::string::npos);
  EXPECT_NE(render_error("{{ range(100001) | length }}").find("MAX_RANGE"), std::string::npos);
  EXPECT_NE(render_error("{{ 'x' * 1000000000 }}").find("too large"), std::string::npos);
}

TEST(JinjaEvaluatorTest, HostileTemplatesFailCleanly) {
  // Nesting is bounded (printing, comparing and freeing such values would recurse without end).
  EXPECT_NE(render_error("{% set ns = namespace(v=[]) %}{% for i in range(600) %}"
                         "{% set ns.v = [ns.v] %}{% endfor %}")
                .find("nested more than 512"),
            std::string::npos);
  EXPECT_NE(render_error("{% set ns = namespace(v=[]) %}{% for i in range(600) %}"
                         "{% set ns.v = [ns.v.count] %}{% endfor %}")
                .find("nested more than 512"),
            std::string::npos);
  // A namespace holding itself: printing it fails instead of recursing for ever.
  EXPECT_NE(
      render_error("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}").find("too deeply"),
      std::string::npos);
  EXPECT_NE(
      render_error("{% for i in range(100000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}")
          .find("evaluation steps"),
      std::string::npos);
  std::string deep_json;
  for (int i = 0; i < 600; ++i) deep_json += "[";
  for (int i = 0; i < 600; ++i) deep_json += "]";
  EXPECT_NE(render_error("{{ x }}", ("{\"x\": " + deep_json + "}").c_str()).find("levels deep"),
            std::string::npos);
}

TEST(JinjaEvaluatorTest, MethodsAndFilters) {
  EXPECT_EQ(render("{{ ' a,b '.strip().split(',') }} {{ 'x'.upper() }} {{ d.get('k', 0) }}"
                   " {{ 'abc'.startswith('ab') }} {{ 'a-b'.replace('-', '+') }}",
                   R"({"d": {}})"),
            "['a', 'b'] X 0 True a+b");
  EXPECT_EQ(
      render("{{ msgs | selectattr('role', 'equalto', 'user') | map(attribute='content') | list }}",
             R"({"msgs": [{"role": "user", "content": "u"}, {"role": "system", "content": "s"}]})"),
      "['u']");
  EXPECT_EQ(render("{{ [3, 1, 2] | sort | join(',') }} {{ {'b': 1, 'a': 2} | dictsort }} "
                   "{{ ['a', 'A', 'b'] | unique | list }}"),
            "1,2,3 [('a', 2), ('b', 1)] ['a', 'b']");
  EXPECT_EQ(render("{{ x | tojson }}", R"({"x": {"name": "caf\u00e9", "n": [1, 2.0]}})"),
            R"({"name": "café", "n": [1, 2.0]})");
  EXPECT_EQ(render("{{ x | tojson(indent=2) }}", R"({"x": {"a": [1]}})"),
            "{\n  \"a\": [\n    1\n  ]\n}");
  EXPECT_EQ(render("{{ 'a\nb' | indent(2, first=true) }}|{{ '42.7' | int }}|{{ 2.5 | round }}"),
            "  a\n  b|42|2.0");
  EXPECT_EQ(render("{{ '<b>' + 'x' | safe }} {{ 'ab<' | escape }}"), "&lt;b&gt;x ab&lt;");
  // Generators: |length fails on them as in Python; |list materialises them.
  EXPECT_NE(render_error("{{ [1, 2] | select('odd') | length }}").find("has no len()"),
            std::string::npos);
}

TEST(JinjaEvaluatorTest, RaiseExceptionMessageReachesTheCaller) {
  const std::string msg = render_error(
      "{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}{% "
      "endif %}",
      R"({"messages": [{"role": "system", "content": "x"}]})");
  EXPECT_NE(msg.find("chat template raised an error: System role not supported"), std::string::npos)
      << msg;
}

TEST(JinjaEvaluatorTest, UnknownFilterInConditionalFailsOnlyWhenEvaluated) {
  const std::string source = "{% if s is string %}{{ s | from_json }}{% else %}{{ s }}{% endif %}";
  EXPECT_EQ(render(source, R"({"s": 5})"), "5");
  EXPECT_NE(render_error(source, R"({"s": "{}"})").find("no filter named 'from_json'"),
            std::string::npos);
}

}  // namespace
}  // namespace inflight
