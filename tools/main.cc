// The `inflight` binary: one subcommand per cmd_*.cc file in this directory.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/logging.h"
#include "tools/command.h"
#include "tools/parallel_launch.h"

namespace inflight::tools {

namespace {
std::vector<Command>& registry() {
  static std::vector<Command> r;
  return r;
}
}  // namespace

bool register_command(Command command) {
  registry().push_back(std::move(command));
  return true;
}

const std::vector<Command>& commands() {
  return registry();
}

}  // namespace inflight::tools

namespace {

// vLLM's multi-letter short options, which CLI11 does not take, as their long names.
std::vector<std::string> with_long_names(int argc, char** argv) {
  static const std::pair<std::string_view, std::string_view> kAliases[] = {
      {"-tp", "--tensor-parallel-size"}, {"-pp", "--pipeline-parallel-size"}};
  std::vector<std::string> args;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    for (const auto& [short_name, long_name] : kAliases) {
      if (a == short_name || a.rfind(std::string(short_name) + "=", 0) == 0) {
        a = std::string(long_name) + a.substr(short_name.size());
      }
    }
    args.push_back(std::move(a));
  }
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  using inflight::tools::commands;
  inflight::init_logging();
  inflight::tools::set_command_line(argc, argv);
  std::vector<std::string> args = with_long_names(argc, argv);
  std::vector<char*> arg_ptrs;
  for (std::string& a : args) arg_ptrs.push_back(a.data());
  argc = static_cast<int>(arg_ptrs.size());
  argv = arg_ptrs.data();
  CLI::App app{"inflight: LLM inference engine and server"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "inflight 0.1.0");
  std::vector<std::pair<CLI::App*, const inflight::tools::Command*>> subs;
  for (const auto& c : commands()) {
    CLI::App* sub = app.add_subcommand(c.name, c.description);
    c.setup(*sub);
    // A single-valued option given twice takes its last value (as argparse, so that a script's
    // defaults can be followed by the user's arguments).
    for (CLI::Option* option : sub->get_options()) {
      if (option->get_items_expected_max() == 1) {
        option->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
      }
    }
    subs.emplace_back(sub, &c);
  }
  CLI11_PARSE(app, argc, argv);
  using inflight::tools::exit_code;
  try {
    for (auto& [sub, cmd] : subs) {
      if (sub->parsed()) return exit_code(cmd->run());
    }
  } catch (const inflight::Error& e) {
    // What the user can act on; the source location only for a bug of ours.
    const bool internal = e.code() == inflight::ErrorCode::kInternal;
    std::fprintf(stderr, "error: %s\n", internal ? e.what() : e.message().c_str());
    return exit_code(1);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return exit_code(1);
  }
  return 1;
}
