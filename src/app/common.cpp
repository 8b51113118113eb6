#include "app/common.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>

#include <fmt/format.h>

#include "collect/collectors.hpp"
#include "collect/kernel_log_parse.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/output_file.hpp"
#include "core/text.hpp"
#include "rules/comparisons/baseline.hpp"
#include "rules/comparisons/matrix.hpp"
#include "rules/reference/result_codes.hpp"

namespace gpudx::app {
namespace {

// The scanner keeps the current boot when --since does not parse (a library caller gets a note); on the
// command line it is a mistake to tell at once.
std::function<std::string(const std::string&)> since_validator() {
    return [](const std::string& text) -> std::string {
        auto spec = parse_since(text);
        if (spec) return {};
        // CLI11 names the option itself: "--since: last tuesday: not seconds since boot ...".
        std::string message = spec.error().message;
        if (message.starts_with("--since ")) message.erase(0, std::string_view("--since ").size());
        return message;
    };
}

}  // namespace

void add_node_options(CLI::App& cmd, NodeOptions& o) {
    cmd.add_option("--root", o.root, "Read the node under DIR instead of / (a capture made by `gpudx gather`)")
        ->type_name("DIR");
    cmd.add_option("--kernel-log", o.kernel_log,
                   "Read this saved kernel log (dmesg, dmesg -T, journalctl -k, syslog or raw kmsg) instead of "
                   "/dev/kmsg: a file, a pipe or FIFO (<(journalctl -k)), or - for standard input")
        ->type_name("FILE");
    cmd.add_option("--since", o.since, "Kernel-log window start: seconds since boot, or a wall time as the log writes it")
        ->type_name("TIME")
        ->check(since_validator());
    cmd.add_option("--deadline", o.deadline_s, "Seconds each driver layer (NVML, CUDA) may take before it is a finding")
        ->capture_default_str()
        ->check(CLI::Range(0.05, 600.0));
    cmd.add_option("--health-interval", o.health_interval_ms,
                   "Milliseconds between the two samples of what is judged by its growth or persistence (clock reasons, "
                   "temperature, power, NVLink and PCIe replay counters through NVML; PCIe AER and InfiniBand port "
                   "error counters from sysfs); the second is taken only when the first shows something to confirm. "
                   "0: one sample (docs/gpu-health.md, docs/host-health.md)")
        ->type_name("MS")
        ->capture_default_str()
        ->check(CLI::Range(0u, 60000u));
    cmd.add_flag("--no-driver", o.no_driver, "Do not load NVML or the CUDA driver (host layers only)");
    cmd.add_flag("--no-cuda", o.no_cuda, "Load NVML but not the CUDA driver (skips cuInit, ~0.4 s on large GPUs)");
    cmd.add_flag("--all-devices", o.all_devices,
                 "Also evaluate CUDA with CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER unset");
    cmd.add_option("--driver-lib-dir", o.driver_lib_dir,
                   "Load libnvidia-ml.so.1 and libcuda.so.1 from DIR (stand-ins, or a specific driver)")
        ->type_name("DIR");
}

CLI::Validator non_negative_number() {
    return CLI::Validator(
        [](std::string& text) -> std::string {
            auto value = parse_double(text);
            if (!value) return "Value " + text + " is not a number";
            return *value < 0 ? "Value " + text + " is negative; expected 0 or more" : std::string();
        },
        "");
}

void exclude_node_sources(CLI::Option* from, CLI::App& cmd) {
    for (const char* source : {"--root", "--kernel-log", "--driver-lib-dir"}) from->excludes(cmd.get_option(source));
}

CollectOptions make_collect_options(const NodeOptions& o, const Root& root) {
    CollectOptions c;
    if (!o.kernel_log.empty()) c.kernel_log_file = o.kernel_log;
    c.since = o.since;
    c.kernel_log_words = kernel_log_text_words(o.signatures ? *o.signatures : builtin_signature_catalogue());
    c.environment = load_environment(root);
    c.driver_deadline = std::chrono::milliseconds(static_cast<long>(o.deadline_s * 1000));
    c.health_interval_ms = o.health_interval_ms;
    c.counter_interval = std::chrono::milliseconds(o.health_interval_ms);
    c.probe_driver = !o.no_driver;
    // A capture holds the driver's recorded answers, not a driver: probing would ask THIS machine's NVML and
    // CUDA and mix their answers with the capture's files. They replay only through the stand-ins.
    if (c.probe_driver && !root.is_live() && o.driver_lib_dir.empty()) {
        c.probe_driver = false;
        c.driver_not_probed_reason =
            "a capture: driver answers replay only through --driver-lib-dir <stand-ins>; see docs/capture-format.md";
    }
    c.all_devices = o.all_devices;
    c.probe_cuda = !o.no_cuda;
    if (!o.driver_lib_dir.empty()) c.driver_library_dir = o.driver_lib_dir;
    c.pids = o.pids;
    return c;
}

Snapshot collect_node(const NodeOptions& o) {
    std::error_code ec;
    if (!std::filesystem::is_directory(o.root, ec)) throw UsageError{"--root " + o.root + ": not a directory"};
    // A pipe, a FIFO or standard input is as good as a file: it is read once, as it comes (core/input_file.hpp).
    if (!o.kernel_log.empty())
        if (auto usable = check_user_input(o.kernel_log); !usable)
            throw UsageError{"--kernel-log " + usable.error().message};
    Root root(o.root);
    auto opts = make_collect_options(o, root);
    return take_snapshot(root, opts);
}

CLI::Option* add_report_format_option(CLI::App& cmd, ReportFormat& format, const std::string& help) {
    // Checked before the callback runs, so the name it is given is one of the table's.
    return cmd
        .add_option_function<std::string>(
            "--format", [&format](const std::string& name) { format = *parse_name<ReportFormat>(name); }, help)
        ->check(CLI::IsMember(all_names<ReportFormat>()));
}

Snapshot load_or_collect(const std::string& from, const NodeOptions& node) {
    if (from.empty()) return collect_node(node);
    auto loaded = load_snapshot_file(from);
    if (!loaded) throw UsageError{from + ": " + loaded.error().message};
    return std::move(*loaded);
}

void add_drain_options(CLI::App& cmd, DrainCliOptions& o, const std::string& drain_help, bool scontrol_needs_drain) {
    auto* drain = cmd.add_flag("--drain", o.drain, drain_help);
    cmd.add_option("--node", o.node, "Slurm node name for --drain (default: SLURMD_NODENAME, else the short host name)")
        ->type_name("NAME")
        ->needs(drain);
    auto* scontrol =
        cmd.add_option("--scontrol", o.scontrol,
                       scontrol_needs_drain ? "scontrol to run for --drain (default: $GPUDX_SCONTROL, else scontrol)"
                                            : "scontrol to run for --drain and --slurm-job (default: $GPUDX_SCONTROL, "
                                              "else scontrol)")
            ->type_name("PATH");
    if (scontrol_needs_drain) scontrol->needs(drain);
}

SlurmDrainOptions slurm_drain_options(const DrainCliOptions& o) {
    SlurmDrainOptions so;
    std::map<std::string, std::string> env;
    if (const char* v = std::getenv("SLURMD_NODENAME")) env["SLURMD_NODENAME"] = v;
    so.node = o.node.empty() ? default_slurm_node_name(env) : o.node;
    if (!o.scontrol.empty()) so.scontrol = o.scontrol;
    else if (const char* v = std::getenv("GPUDX_SCONTROL"); v && *v) so.scontrol = v;
    return so;
}

std::optional<NodeRecord> load_baseline_option(const std::string& path) {
    if (path.empty()) return std::nullopt;
    auto record = load_node_record(path);
    if (!record) throw UsageError{path + ": " + record.error().message};
    return std::move(*record);
}

std::optional<Matrix> load_matrix_option(const std::string& path) {
    if (path.empty()) return std::nullopt;
    auto m = load_matrix(path);
    if (!m) throw UsageError{m.error().message};
    return std::move(*m);
}

void load_judge_files(const std::string& xid_policy, const std::string& signatures,
                      const std::vector<std::string>& error_codes, JudgeFiles& files, DiagnoseOptions& diagnose,
                      NodeOptions& node) {
    if (!xid_policy.empty()) {
        auto p = load_xid_policy_file(xid_policy);
        if (!p) throw UsageError{p.error().message};
        files.xid_policy = std::move(*p);
        diagnose.xid_policy = &files.xid_policy;
    }
    if (!signatures.empty()) {
        auto c = load_signature_catalogue_file(signatures);
        if (!c) throw UsageError{c.error().message};
        files.signatures = std::move(*c);
        node.signatures = &files.signatures;
        diagnose.signatures = &files.signatures;
    }
    if (!error_codes.empty()) {
        auto t = result_code_tables_with_site(error_codes);
        if (!t) throw UsageError{t.error().message};
        files.result_codes = std::move(*t);
        diagnose.result_codes = &files.result_codes;
    }
}

namespace {

// The reader of a pipe stopped reading (`gpudx xid --list | head`): a normal end, never an error message, and
// never one per later write. gpudx ends as by the SIGPIPE that write would have raised had its parent not
// ignored the signal, which is what the shell and `set -o pipefail` expect of any program in a pipeline.
[[noreturn]] void end_as_by_sigpipe() {
    std::signal(SIGPIPE, SIG_DFL);
    sigset_t pipe_signal;
    sigemptyset(&pipe_signal);
    sigaddset(&pipe_signal, SIGPIPE);
    ::pthread_sigmask(SIG_UNBLOCK, &pipe_signal, nullptr);
    ::raise(SIGPIPE);
    ::_exit(128 + SIGPIPE);
}

// The path of an Error about standard output: whatever its errno, the output is lost (exit 74).
constexpr std::string_view kStandardOutput = "<standard output>";

std::unexpected<Error> standard_output_failed(int err) {
    if (err == EPIPE) end_as_by_sigpipe();
    if (err == 0) err = EIO;
    return fail(fmt::format("cannot write to standard output: {}", std::strerror(err)), std::string(kStandardOutput),
                err);
}

Result<void> try_write_standard_output(std::string_view data) {
    errno = 0;
    if (std::fwrite(data.data(), 1, data.size(), stdout) != data.size() || std::fflush(stdout) != 0)
        return standard_output_failed(errno);
    return {};
}

}  // namespace

void write_standard_output(std::string_view data) {
    if (auto written = try_write_standard_output(data); !written) throw_write_error(written.error());
}

void throw_write_error(const Error& e) {
    if (e.sys_errno == EPIPE) end_as_by_sigpipe();
    if (e.path == kStandardOutput || is_write_failure(e.sys_errno)) throw OutputError{e.message};
    throw UsageError{e.message};
}

Result<void> try_write_output(const std::string& path, const std::string& content, OutputKind kind) {
    std::string stripped;
    if (kind != OutputKind::data) stripped = strip_terminal_controls(content, kind == OutputKind::coloured_text);
    const std::string& out = kind == OutputKind::data ? content : stripped;
    if (path.empty() || path == "-") return try_write_standard_output(out);
    return write_output_file(path, out);
}

void write_output(const std::string& path, const std::string& content, OutputKind kind) {
    if (auto written = try_write_output(path, content, kind); !written) throw_write_error(written.error());
}

void hold_closed_standard_descriptors() {
    for (int fd : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO}) {
        if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
        int held = ::open("/dev/null", fd == STDIN_FILENO ? O_WRONLY : O_RDONLY);
        if (held >= 0 && held != fd) {
            ::dup2(held, fd);
            ::close(held);
        }
    }
}

void finish_standard_output() {
    std::cout.flush();  // CLI11's --help and --version go through std::cout, which writes through stdout
    bool failed_earlier = std::ferror(stdout) != 0;
    errno = 0;
    if (std::fflush(stdout) != 0) throw_write_error(standard_output_failed(errno).error());
    if (failed_earlier)
        throw OutputError{"cannot write to standard output: an earlier write failed (its output is incomplete)"};
    // A full disk on some filesystems (NFS, a quota checked late) shows only when the file is closed.
    errno = 0;
    if (std::fclose(stdout) != 0) throw_write_error(standard_output_failed(errno).error());
}

bool stdout_is_terminal() { return ::isatty(STDOUT_FILENO) == 1; }

}  // namespace gpudx::app
