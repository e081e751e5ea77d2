// `inflight tokenize` and `inflight detokenize`: the tokenizer on stdin/stdout.
//
//   inflight tokenize --tokenizer PATH [--add-special] [--parse-special] [--jsonl] [--stats]
//     stdin text -> one JSON array of ids. With --jsonl every input line is a JSON string and
//     every output line the array of its ids. --stats prints the load and encode times (encode
//     calls only, one thread; wall and CPU time) as one JSON object on stderr, for benchmarks.
//   inflight detokenize --tokenizer PATH [--skip-special] [--jsonl]
//     stdin JSON array of ids -> the text. With --jsonl every input line is an array and every
//     output line the JSON string of its text.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <time.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "core/check.h"
#include "tokenizer/tokenizer.h"
#include "tools/command.h"

namespace inflight::tools {
namespace {

struct Options {
  std::string tokenizer;
  bool add_special = false;
  bool parse_special = false;
  bool skip_special = false;
  bool jsonl = false;
  bool stats = false;
};
Options g_tokenize;
Options g_detokenize;

std::string ids_json(const std::vector<int32_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(ids[i]);
  }
  return s + "]";
}

std::vector<int32_t> parse_ids(const std::string& text, size_t line_no) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    INFLIGHT_THROW(ErrorCode::kInvalidArgument, "stdin line {}: not JSON: {}", line_no, e.what());
  }
  INFLIGHT_CHECK_CODE(j.is_array(), ErrorCode::kInvalidArgument,
                      "stdin line {}: expected a JSON array of token ids", line_no);
  std::vector<int32_t> ids;
  for (const auto& v : j) {
    INFLIGHT_CHECK_CODE(v.is_number_integer(), ErrorCode::kInvalidArgument,
                        "stdin line {}: {} is not a token id", line_no, v.dump());
    ids.push_back(v.get<int32_t>());
  }
  return ids;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// CPU time of this thread: unlike wall time, barely affected by other processes on the machine.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

int run_tokenize() {
  const Options& o = g_tokenize;
  const auto load_start = std::chrono::steady_clock::now();
  const auto tok = Tokenizer::from_path(o.tokenizer);
  const double load_seconds = seconds_since(load_start);
  size_t num_texts = 0, num_bytes = 0, num_tokens = 0;
  double encode_seconds = 0, encode_cpu_seconds = 0;
  auto encode = [&](const std::string& text) {
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = thread_cpu_seconds();
    std::vector<int32_t> ids = tok->encode(text, o.add_special, o.parse_special);
    encode_cpu_seconds += thread_cpu_seconds() - cpu_start;
    encode_seconds += seconds_since(start);
    ++num_texts;
    num_bytes += text.size();
    num_tokens += ids.size();
    return ids;
  };
  if (!o.jsonl) {
    const std::string text{std::istreambuf_iterator<char>(std::cin), {}};
    std::cout << ids_json(encode(text)) << '\n';
  } else {
    std::string line;
    for (size_t line_no = 1; std::getline(std::cin, line); ++line_no) {
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception& e) {
        INFLIGHT_THROW(ErrorCode::kInvalidArgument, "stdin line {}: not JSON: {}", line_no,
                       e.what());
      }
      INFLIGHT_CHECK_CODE(j.is_string(), ErrorCode::kInvalidArgument,
                          "stdin line {}: expected a JSON string", line_no);
      std::cout << ids_json(encode(j.get<std::string>())) << '\n';
    }
  }
  if (o.stats) {
    std::cerr << nlohmann::json{{"tokenizer", tok->description()},
                                {"load_seconds", load_seconds},
                                {"texts", num_texts},
                                {"bytes", num_bytes},
                                {"tokens", num_tokens},
                                {"encode_seconds", encode_seconds},
                                {"encode_cpu_seconds", encode_cpu_seconds}}
                     .dump()
              << '\n';
  }
  return 0;
}

int run_detokenize() {
  const Options& o = g_detokenize;
  const auto tok = Tokenizer::from_path(o.tokenizer);
  if (!o.jsonl) {
    const std::string text{std::istreambuf_iterator<char>(std::cin), {}};
    std::cout << tok->decode(parse_ids(text, 1), o.skip_special);
    return 0;
  }
  std::string line;
  for (size_t line_no = 1; std::getline(std::cin, line); ++line_no) {
    // decode() returns valid UTF-8, so dump() cannot throw on the text.
    std::cout << nlohmann::json(tok->decode(parse_ids(line, line_no), o.skip_special)).dump()
              << '\n';
  }
  return 0;
}

void setup_tokenize(CLI::App& app) {
  app.add_option("--tokenizer", g_tokenize.tokenizer,
                 "GGUF file, tokenizer.json, .tiktoken file, or a directory holding one")
      ->required();
  app.add_flag("--add-special", g_tokenize.add_special, "Add BOS/EOS as the tokenizer does");
  app.add_flag("--parse-special", g_tokenize.parse_special,
               "Turn special tokens written in the text (<|im_start|>) into their ids");
  app.add_flag("--jsonl", g_tokenize.jsonl,
               "One JSON string per input line, one array per output line");
  app.add_flag("--stats", g_tokenize.stats, "Print load and encode timings as JSON on stderr");
}

void setup_detokenize(CLI::App& app) {
  app.add_option("--tokenizer", g_detokenize.tokenizer,
                 "GGUF file, tokenizer.json, .tiktoken file, or a directory holding one")
      ->required();
  app.add_flag("--skip-special", g_detokenize.skip_special,
               "Leave out BOS/EOS and other control tokens");
  app.add_flag("--jsonl", g_detokenize.jsonl,
               "One array per input line, one JSON string per output line");
}

const bool kRegistered =
    register_command({"tokenize", "Print the token ids of stdin as a JSON array", &setup_tokenize,
                      &run_tokenize}) &&
    register_command({"detokenize", "Print the text of a JSON array of token ids on stdin",
                      &setup_detokenize, &run_detokenize});

}  // namespace
}  // namespace inflight::tools
