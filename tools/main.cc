// The `inflight` binary: one subcommand per cmd_*.cc file in this directory.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include "core/check.h"
#include "core/logging.h"
#include "tools/command.h"

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

const std::vector<Command>& commands() { return registry(); }

}  // namespace inflight::tools

int main(int argc, char** argv) {
  using inflight::tools::commands;
  inflight::init_logging();
  CLI::App app{"inflight: LLM inference engine and server"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "inflight 0.1.0");
  std::vector<std::pair<CLI::App*, const inflight::tools::Command*>> subs;
  for (const auto& c : commands()) {
    CLI::App* sub = app.add_subcommand(c.name, c.description);
    c.setup(*sub);
    subs.emplace_back(sub, &c);
  }
  CLI11_PARSE(app, argc, argv);
  try {
    for (auto& [sub, cmd] : subs) {
      if (sub->parsed()) return cmd->run();
    }
  } catch (const inflight::Error& e) {
    // What the user can act on; the source location only for a bug of ours.
    const bool internal = e.code() == inflight::ErrorCode::kInternal;
    std::fprintf(stderr, "error: %s\n", internal ? e.what() : e.message().c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 1;
}
