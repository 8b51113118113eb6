#pragma once
// `gpudx gather`: capture what the collectors read on this node as a tree that `--root` replays
// (docs/capture-format.md).
#include <functional>
#include <string>

#include "collect/context.hpp"
#include "core/error.hpp"
#include "model/snapshot.hpp"

namespace gpudx {

struct GatherOptions {
    std::string output;       // OUT.tar.gz, "-" (the archive to standard output), or a directory when as_directory
    bool as_directory = false;
    CollectOptions collect;   // how the snapshot that drives the capture is taken
    bool run_commands = true; // nvidia-smi -q -x, ldconfig -p, uname -a when present
    // The node page of the snapshot the capture was made from (`gpudx report`'s HTML), written as report.html at
    // the top of the capture, the first thing whoever unpacks it reads. The caller renders it: the rules and the
    // renderers are not the capture's to call. Empty: no page.
    std::function<std::string(const Snapshot&)> front_page;
};

struct GatherSummary {
    size_t files = 0, links = 0, directories = 0, device_nodes = 0;
    size_t placeholders = 0;  // non-empty files gpudx never reads whole (libraries), kept empty
    std::vector<std::string> commands;  // command outputs saved under _commands/
    std::vector<std::string> problems;
    std::string archive;  // the compressed archive, when the output is "-": the caller writes it
};

// The environment variables worth recording: the GPU-, scheduler- and loader-related ones.
bool is_recorded_variable(std::string_view name);

// The capture is written into a temporary folder and published only when whole: an unpacked capture by moving
// it into place, an archive by writing it where asked. A failed write (a full disk) fails the capture, naming the
// file; the temporary folder never outlives gpudx, whether it fails, is interrupted or is killed.
// Forks (core/staging_dir.hpp): call before any thread starts.
Result<GatherSummary> gather(const GatherOptions& options);

}  // namespace gpudx
