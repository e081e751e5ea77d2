// Subcommands of the `inflight` binary register themselves from their own cmd_*.cc file:
//
//   static const bool kRegistered = inflight::tools::register_command(
//       {"tokenize", "Print the token ids of stdin", &setup, &run});
//
// `setup` adds options to the subcommand's CLI::App (binding them to file-static state);
// `run` executes after parsing and returns the process exit code. tools/main.cc builds the
// CLI from the registry, runs the chosen command and turns errors into messages and exit code 1.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace inflight::tools {

struct Command {
  std::string name;
  std::string description;
  std::function<void(CLI::App&)> setup;
  std::function<int()> run;
};

bool register_command(Command command);
const std::vector<Command>& commands();

}  // namespace inflight::tools
