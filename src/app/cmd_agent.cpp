// `gpudx agent`: the node agent (docs/agent.md).
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "agent/agent.hpp"
#include "agent/events.hpp"
#include "agent/http.hpp"
#include "app/command.hpp"
#include "app/common.hpp"
#include "core/error.hpp"

namespace gpudx::app {
namespace {

struct AgentCmdOptions {
    NodeOptions node;
    std::string baseline, matrix;
    double interval_s = 60;
    std::string listen = "127.0.0.1:9400";
    bool no_listen = false;
    bool allow_remote = false;
    std::string socket;
    bool no_socket = false;
    std::string state_dir = "/var/lib/gpudx";
    std::string retain = "30d";
    double max_store_mb = 64;
    std::optional<unsigned> expect_gpus;
    std::string xid_policy;
    std::string signatures;
    std::vector<std::string> error_codes;
    DrainCliOptions drain;
    bool no_nvml_events = false;
};

// This very binary, so the child that collects is the same gpudx as the agent.
std::string self_path() {
    char buf[PATH_MAX];
    ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return "gpudx";
    return std::string(buf, static_cast<size_t>(n));
}

// `gpudx snapshot` with the node options the agent was given.
std::vector<std::string> snapshot_command(const NodeOptions& n) {
    std::vector<std::string> argv = {self_path(), "snapshot", "--root", n.root, "--deadline", fmt::format("{}", n.deadline_s)};
    if (!n.kernel_log.empty()) argv.insert(argv.end(), {"--kernel-log", n.kernel_log});
    if (!n.since.empty()) argv.insert(argv.end(), {"--since", n.since});
    if (n.no_driver) argv.push_back("--no-driver");
    if (n.no_cuda) argv.push_back("--no-cuda");
    if (n.all_devices) argv.push_back("--all-devices");
    if (!n.driver_lib_dir.empty()) argv.insert(argv.end(), {"--driver-lib-dir", n.driver_lib_dir});
    return argv;
}

// `gpudx nvml-events` for the agent's watcher: one "alive" line a second, so a wait that hangs is seen.
std::vector<std::string> nvml_events_command(const NodeOptions& n) {
    std::vector<std::string> argv = {self_path(), "nvml-events", "--root", n.root, "--wait", "1"};
    if (!n.driver_lib_dir.empty()) argv.insert(argv.end(), {"--driver-lib-dir", n.driver_lib_dir});
    return argv;
}

// Every descriptor the system lets the agent have, for its own reading (the followed kernel log and its
// re-reads, the store, its children's pipes): the soft limit raised to the hard one (the unit's LimitNOFILE).
// Its clients cannot take them: each listener holds at most its connection cap (docs/agent.md).
void raise_descriptor_limit() {
    rlimit nofile{};
    if (::getrlimit(RLIMIT_NOFILE, &nofile) != 0 || nofile.rlim_cur >= nofile.rlim_max) return;
    nofile.rlim_cur = nofile.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &nofile) != 0)
        std::fprintf(stderr, "gpudx agent: cannot raise the descriptor limit to %llu: %s\n",
                     static_cast<unsigned long long>(nofile.rlim_max), std::strerror(errno));
}

int run_agent_command(const AgentCmdOptions& o) {
    std::error_code ec;
    if (!std::filesystem::is_directory(o.node.root, ec)) throw UsageError{"--root " + o.node.root + ": not a directory"};
    // Unlike diagnose's, the agent's --kernel-log is read again by every diagnosis and followed as it grows:
    // a pipe, read once, cannot serve it.
    if (!o.node.kernel_log.empty() && !std::filesystem::is_regular_file(o.node.kernel_log, ec))
        throw UsageError{"--kernel-log " + o.node.kernel_log +
                         (std::filesystem::exists(o.node.kernel_log, ec)
                              ? ": not a regular file (the agent reads it again at every diagnosis and follows it "
                                "as it grows, which a pipe cannot give)"
                              : ": no such file")};
    AgentOptions a;
    a.root = o.node.root;
    a.baseline = load_baseline_option(o.baseline);
    a.matrix = load_matrix_option(o.matrix);
    a.state_dir = o.state_dir;
    JudgeFiles judge_files;
    NodeOptions node = o.node;
    load_judge_files(o.xid_policy, o.signatures, o.error_codes, judge_files, a.diagnose, node);
    Root root(o.node.root);
    a.collect = make_collect_options(node, root);
    a.kernel_log_words = a.collect.kernel_log_words;
    a.diagnose.expect_gpus = o.expect_gpus;
    a.diagnose.since = o.node.since;
    a.snapshot_command = snapshot_command(o.node);
    // The child has a deadline per driver layer; this one only catches a child that never ends.
    a.snapshot_timeout = std::chrono::milliseconds(static_cast<long>(o.node.deadline_s * 4000) + 60000);
    a.interval = std::chrono::milliseconds(static_cast<long>(o.interval_s * 1000));
    if (!o.node.no_driver && !o.no_nvml_events) {
        a.nvml_events.command = nvml_events_command(o.node);
        // A setup call gets the driver deadline, a wait its second; past both (and a second of slack), hung.
        a.nvml_events.quiet_limit = std::chrono::milliseconds(static_cast<long>(o.node.deadline_s * 1000) + 2000);
        a.nvml_events.restart_after = a.interval;
    }
    if (o.no_listen) {
        a.listen.reset();
    } else {
        auto address = parse_listen_address(o.listen);
        if (!address) throw UsageError{address.error().message};
        if (!address->loopback() && !o.allow_remote)
            throw UsageError{fmt::format("--listen {}: not a loopback address; the agent answers beyond this machine "
                                         "only with --allow-remote",
                                         o.listen)};
        a.listen = o.listen;
    }
    if (!o.no_socket) a.socket_path = o.socket.empty() ? (std::filesystem::path(o.state_dir) / "agent.sock").string() : o.socket;
    auto retain = parse_event_time(o.retain, 0);
    if (!retain || *retain > 0 || o.retain.find_first_of("smhd") == std::string::npos)
        throw UsageError{"--retain " + o.retain + ": an age such as 30d, 12h or 90m"};
    a.store.max_age_ms = -*retain;
    a.store.max_bytes = static_cast<int64_t>(o.max_store_mb * 1024 * 1024);
    a.drain = o.drain.drain;
    if (a.drain) {
        a.slurm = slurm_drain_options(o.drain);
        a.slurm.update_own_reason = false;  // one drain for one episode of errors, however many findings it grows
    }
    raise_descriptor_limit();
    return run_agent(a);
}

CommandRegistrar register_agent{
    {"agent", "Run as the node agent: follow the kernel log, keep events, serve /metrics and /v1/, drain Slurm", 15,
     [](CLI::App& cmd) -> std::function<int()> {
         auto o = std::make_shared<AgentCmdOptions>();
         add_node_options(cmd, o->node);
         cmd.get_option("--kernel-log")
             ->description("Follow this kernel log file (like tail -F) instead of /dev/kmsg: a regular file, read again "
                           "by every diagnosis");
         cmd.add_option("--interval", o->interval_s, "Seconds between full diagnoses (and after each kernel-log event)")
             ->capture_default_str()
             ->check(CLI::Range(1.0, 86400.0));
         auto* listen = cmd.add_option("--listen", o->listen, "Serve HTTP on HOST:PORT (loopback unless --allow-remote)")
                            ->type_name("HOST:PORT")
                            ->capture_default_str();
         cmd.add_flag("--no-listen", o->no_listen, "No TCP listener (the unix socket only)")->excludes(listen);
         cmd.add_flag("--allow-remote", o->allow_remote, "Allow --listen on an address other machines can reach");
         auto* socket = cmd.add_option("--socket", o->socket, "Unix socket to serve on, mode 0660: the agent's user and group (default: STATE_DIR/agent.sock)")
                            ->type_name("PATH");
         cmd.add_flag("--no-socket", o->no_socket, "No unix socket")->excludes(socket);
         cmd.add_option("--state-dir", o->state_dir, "Where the event store (events.db) and the socket live")
             ->type_name("DIR")
             ->capture_default_str();
         cmd.add_option("--retain", o->retain, "Keep events this long (30d, 12h, 90m)")->capture_default_str();
         cmd.add_option("--max-store-mb", o->max_store_mb, "Keep the event store below this many MiB (oldest go first)")
             ->capture_default_str()
             ->check(CLI::Range(1.0, 1048576.0));
         cmd.add_flag("--no-nvml-events", o->no_nvml_events,
                      "Do not watch NVML's events (the kernel log and the interval only)");
         cmd.add_option("--expect-gpus", o->expect_gpus, "Number of GPUs this node should have on PCIe");
         cmd.add_option("--baseline", o->baseline,
                        "Hold the node to this node record (`gpudx baseline save`) at every diagnosis, as diagnose "
                        "--baseline: a card missing, moved or replaced, a link trained lower, a version changed")
             ->type_name("FILE");
         cmd.add_option("--matrix", o->matrix,
                        "Hold the node to its class's tested set in this compatibility matrix at every diagnosis, as "
                        "diagnose --matrix; /metrics names the class in gpudx_node_info (deploy/prometheus groups by it)")
             ->type_name("FILE");
         cmd.add_option("--xid-policy", o->xid_policy, "Xid severities from this TOML file (as for diagnose)")
             ->type_name("FILE");
         cmd.add_option("--signatures", o->signatures, "Site signature catalogue (TOML, as for diagnose)")
             ->type_name("FILE");
         cmd.add_option("--error-codes", o->error_codes, "Site result-code table (TOML, as for diagnose; repeatable)")
             ->type_name("FILE");
         add_drain_options(cmd, o->drain,
                           "Slurm: drain this node at once on an error finding; resume it when healthy again, only "
                           "if gpudx drained it");
         cmd.footer(
             "Follows /dev/kmsg (or --kernel-log FILE, like tail -F) and judges every new line by the signature\n"
             "catalogue at once; watches NVML's events (Xid, double-bit ECC, recovery action: `gpudx nvml-events`\n"
             "as a child it can kill) and re-diagnoses the node on one, and every --interval seconds. A finding\n"
             "that appears or clears is an event, kept in STATE_DIR/events.db. Serves, on --listen and the unix\n"
             "socket:\n"
             "  /metrics                  Prometheus exposition (the names of diagnose --format prom)\n"
             "  /v1/status[?format=F]     the current diagnosis (F: json, text, prom, slurm, npd, nagios)\n"
             "  /v1/events?since=TIME     the events since TIME (Unix seconds, ISO 8601, or an age: 15m, 2h)\n"
             "Ask it with `gpudx status` and `gpudx events`. Stops on SIGTERM or SIGINT (exit 0).\n"
             "Under systemd: Type=notify with WatchdogSec (deploy/systemd/gpudx-agent.service).\n\n"
             "Exit codes: 0 stopped by a signal, 64 usage error or cannot start (a port in use, a socket another\n"
             "agent answers on, a state directory that cannot be made).\n\n"
             "Examples:\n  gpudx agent --drain\n"
             "  gpudx agent --root capture/ --kernel-log kern.log --listen 127.0.0.1:9400 --state-dir /tmp/gpudx \\\n"
             "      --drain --node node17 --scontrol ./fake-scontrol --no-driver\n"
             "Details: docs/agent.md.");
         return [o] { return run_agent_command(*o); };
     }}};

}  // namespace
}  // namespace gpudx::app
