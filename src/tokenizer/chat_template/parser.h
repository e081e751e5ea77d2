// Parser: tokens -> Program, following jinja2's grammar and operator precedence:
//
//   expr      := or ("if" or ("else" expr)?)*          inline if
//   or        := and ("or" and)*
//   and       := not ("and" not)*
//   not       := "not" not | compare
//   compare   := math1 ((== != < <= > >= in "not in") math1)*
//   math1     := concat (("+" | "-") concat)*
//   concat    := math2 ("~" math2)*
//   math2     := pow (("*" | "/" | "//" | "%") pow)*
//   pow       := unary ("**" unary)*                   left-associative, as jinja2
//   unary     := ("-" | "+") unary-without-filters | primary postfix (filter | test | call)*
//   postfix   := ("." name | "[" subscript "]" | "(" args ")")*
//
// Statements: if/elif/else, for (else, inline filter, loop controls), set (also block set and
// ns.attr), macro, call, filter, with, print, generation (transformers' assistant-mask tag).
// Template inheritance and includes (extends, block, include, import) are rejected: a chat
// template is one self-contained string.
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/chat_template/ast.h"
#include "tokenizer/chat_template/lexer.h"

namespace inflight::jinja {

// Throws Error(kInvalidFile) for syntax errors and Error(kUnsupported) for constructs this
// engine does not implement, both naming the template line.
std::shared_ptr<const Program> parse_program(std::string source);

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens);
  StmtList parse_template();

 private:
  // A filter or test name jinja2 does not know. jinja2 rejects it when compiling, unless it sits
  // in an if/elif/else or inline-if of the same frame: then only evaluating it fails.
  struct UnknownName {
    int line;
    std::string what;  // "filter named 'from_json'"
    bool soft;
  };
  // A compile frame as jinja2 counts them: the template, a for-loop body, a macro body, a block
  // set or filter body, ...; `soft` inside if-statements of the same frame.
  struct Frame {
    bool soft = false;
    bool in_loop = false;
    MacroDef* macro = nullptr;  // the innermost macro (or call-block caller) being parsed
    bool* loop_used = nullptr;  // set when the innermost for-loop's body reads `loop`
  };
  using EndTags = std::initializer_list<std::string_view>;

  // ---- token stream (parser.cc) ----
  const Token& cur() const { return toks_[pos_]; }
  const Token& look() const { return toks_[pos_ + 1 < toks_.size() ? pos_ + 1 : pos_]; }
  const Token& next() { return toks_[pos_ + 1 < toks_.size() ? pos_++ : pos_]; }
  bool at_name(std::string_view name) const {
    return cur().type == TokenType::kName && cur().text == name;
  }
  bool at_op(std::string_view op) const {
    return cur().type == TokenType::kOperator && cur().text == op;
  }
  bool skip_name(std::string_view name);
  bool skip_op(std::string_view op);
  void expect_op(std::string_view op);
  void expect_type(TokenType type, std::string_view what);
  std::string expect_name();
  [[noreturn]] void syntax_error(int line, const std::string& what) const;
  [[noreturn]] void unexpected(std::string_view expected) const;
  [[noreturn]] void unsupported(int line, const std::string& what) const;

  // ---- statements (parser.cc) ----
  StmtList subparse(EndTags end_tags);
  StmtList parse_body(EndTags end_tags, bool drop_end);
  // parse_body in a new compile frame (loop body, macro body, block set, ...).
  // macro / loop_used: nullptr inherits the enclosing frame's.
  StmtList parse_frame_body(EndTags end_tags, bool drop_end, bool in_loop, MacroDef* macro,
                            bool* loop_used = nullptr);
  void parse_statement(StmtList& out);
  Stmt parse_for(int line);
  Stmt parse_if(int line);
  Stmt parse_set(int line);
  Stmt parse_macro(int line);
  Stmt parse_call_block(int line);
  Stmt parse_filter_block(int line);
  Stmt parse_with(int line);
  Target parse_target(bool with_namespace, std::string_view extra_end);
  void parse_signature(MacroDef& def);

  // ---- expressions (parser_expression.cc) ----
  ExprPtr parse_expression(bool with_condexpr = true);
  ExprPtr parse_tuple(bool with_condexpr = true, std::string_view extra_end = {},
                      bool explicit_parens = false);
  ExprPtr parse_condexpr();
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filter_expr(ExprPtr node);
  // `|name(args)|...`; operand may be null (block filters); start_inline: no leading "|".
  ExprPtr parse_filter_chain(ExprPtr operand, bool start_inline);
  ExprPtr parse_subscript(ExprPtr node);
  ExprPtr parse_subscribed();
  ExprPtr parse_test(ExprPtr node);
  CallSpec parse_call_args();
  bool is_tuple_end(std::string_view extra_end) const;
  void note_name_load(const std::string& name);
  void note_unknown(int line, std::string what);

  // Bounds recursion on hostile input ("((((..." or thousands of nested ifs).
  class DepthGuard {
   public:
    explicit DepthGuard(Parser& p);
    ~DepthGuard() { --parser_.depth_; }

   private:
    Parser& parser_;
  };
  static constexpr int kMaxDepth = 256;

  std::vector<Token> toks_;
  std::size_t pos_ = 0;
  int depth_ = 0;
  std::vector<Frame> frames_;
  std::vector<UnknownName> unknown_;
};

}  // namespace inflight::jinja
