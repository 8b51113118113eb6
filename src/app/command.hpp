#pragma once
// Each subcommand lives in its own app/cmd_*.cpp and registers itself here, so adding one touches one file.
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace gpudx::app {

// Declares the subcommand's options on `cmd` and returns what runs it (its exit code).
using CommandSetup = std::function<std::function<int()>(CLI::App& cmd)>;

struct Command {
    std::string name;
    std::string summary;
    int order = 100;  // position in --help
    CommandSetup setup;
};

std::vector<Command>& commands();

// One per command file, named after it (register_diagnose): the files of src/app share unity batches.
struct CommandRegistrar {
    explicit CommandRegistrar(Command c) { commands().push_back(std::move(c)); }
};

}  // namespace gpudx::app
