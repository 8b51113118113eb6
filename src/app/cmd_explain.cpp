// `gpudx explain [FILE|-]`: any pasted text (a kernel log, a journal, a container runtime's or a program's
// error, nvidia-smi or lspci output) through the kernel-log parser and the signature catalogue, as findings.
// Nothing of this machine is read unless --here asks for its layers to check the text against.
#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "app/command.hpp"
#include "app/common.hpp"
#include "collect/collectors.hpp"
#include "collect/kernel_log_parse.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "rules/engine/check_context.hpp"
#include "rules/reference/consequences.hpp"
#include "rules/reference/job_context.hpp"
#include "rules/reference/result_codes.hpp"
#include "rules/reference/signatures.hpp"
#include "rules/reference/xid_policy.hpp"

namespace gpudx::app {
namespace {

struct ExplainCmdOptions {
    NodeOptions node;
    std::string file;
    std::optional<std::string> text;
    std::string format = "text";
    bool here = false;
    bool list = false;
    std::string signatures_file;
    std::vector<std::string> error_code_files;
    std::string xid_policy_file;
};

constexpr size_t kUnrecognisedShown = 20;

// What explain learns from the text as it is read, every boot of it: none of its lines is kept (memory flat in the
// text's size), each goes through the line rules, the GPUs the text names by UUID and the first command it ran. The
// Xid events are the scanner's newest 10,000, as diagnose keeps them, and every one is tallied: kernel_log.xid_repeated
// slides its window over those, and judges a longer storm by its tally, as diagnose does.
struct TextReading {
    TextReading(const SignatureCatalogue& catalogue, const DiagnoseOptions& options)
        : rules(options, true), uuids(catalogue) {}
    KernelLogLineRules rules;
    GpuUuidsInText uuids;
    std::optional<std::string> job_context_line;  // the first: the command the rest came from

    void add(KernelLogLine&& line) {
        uuids.add(line);
        if (!job_context_line && is_job_context_line(line.text)) job_context_line = line.text;
        rules.add(std::move(line));
    }
};

KernelLogScanOptions scan_options(const SignatureCatalogue& catalogue, TextReading& reading) {
    KernelLogScanOptions o;
    o.extra_words = explain_scan_words(catalogue);
    o.every_boot = true;
    o.line_sink = [&reading](KernelLogLine&& line) { reading.add(std::move(line)); };
    return o;
}

// The bytes of FILE, "-" (stdin) or --text, through the scanner. FILE may be a pipe, a FIFO or /dev/stdin:
// read once, as it comes (core/input_file.hpp).
KernelLogScanner& read_input(const ExplainCmdOptions& o, KernelLogScanner& scanner, std::string& source) {
    if (o.text) {
        source = "--text";
        scanner.feed(*o.text);
        scanner.feed("\n");
        return scanner;
    }
    std::string path = o.file.empty() ? "-" : o.file;
    source = path == "-" ? "<stdin>" : path;
    auto read = read_user_input(path, [&](std::string_view chunk) { scanner.feed(chunk); });
    if (!read) throw UsageError{read.error().message};
    return scanner;
}

int exit_code_of(const std::vector<Finding>& findings) {
    bool warn = false;
    for (auto& f : findings) {
        if (f.severity == Severity::error) return 1;
        warn |= f.severity == Severity::warning;
    }
    return warn ? 2 : 0;
}

std::string list_text(const SignatureCatalogue& c, const std::vector<ResultCodeTable>& result_tables) {
    std::string out = fmt::format("Signature catalogue {}\n", c.version);
    for (auto& s : c.signatures) {
        out += fmt::format("\n{}  [{}, {}{}]\n  {}\n  meaning: {}\n", s.id, s.severity ? to_string(*s.severity) : "ignore",
                           to_string(s.layer), s.origin == "built-in" ? "" : ", " + s.origin, s.summary, s.meaning);
        if (s.severity) out += fmt::format("  next step: {}\n", s.next_step);
        for (auto& t : s.templates) out += fmt::format("  matches: {}\n", t.source);
    }
    for (auto& t : result_tables) {
        out += fmt::format("\nResult codes: {} {} ({} codes, {})\n", t.table, t.version, t.codes.size(), t.origin);
        for (auto& c : t.codes)
            out += fmt::format("  {} {}  [{}, {}]{}\n", c.number, result_code_id(t, c),
                               c.severity ? to_string(*c.severity) : "no finding", to_string(c.layer),
                               c.text.empty() ? "" : "  \"" + c.text + "\"");
    }
    return out;
}

nlohmann::json list_json(const SignatureCatalogue& c, const std::vector<ResultCodeTable>& result_tables) {
    nlohmann::json sigs = nlohmann::json::array();
    for (auto& s : c.signatures) {
        nlohmann::json j{{"id", s.id},         {"layer", to_string(s.layer)},
                         {"severity", s.severity ? to_string(*s.severity) : "ignore"},
                         {"vendor", s.vendor}, {"summary", s.summary}, {"meaning", s.meaning},
                         {"next_step", s.next_step}, {"origin", s.origin}, {"examples", s.examples}};
        j["match"] = nlohmann::json::array();
        j["gates"] = nlohmann::json::array();
        for (auto& t : s.templates) {
            j["match"].push_back(t.source);
            j["gates"].push_back(t.gate);
        }
        sigs.push_back(std::move(j));
    }
    nlohmann::json tables = nlohmann::json::array();
    for (auto& t : result_tables) {
        nlohmann::json codes = nlohmann::json::array();
        for (auto& c : t.codes)
            codes.push_back({{"id", result_code_id(t, c)}, {"name", c.name}, {"number", c.number}, {"text", c.text},
                             {"layer", to_string(c.layer)},
                             {"severity", c.severity ? nlohmann::json(to_string(*c.severity)) : nlohmann::json()},
                             {"program_error", c.program_error}, {"aliases", c.aliases}, {"meaning", c.meaning},
                             {"next_step", c.next_step}});
        tables.push_back({{"table", t.table}, {"version", t.version}, {"origin", t.origin}, {"codes", std::move(codes)}});
    }
    return {{"catalogue_version", c.version},
            {"signatures", std::move(sigs)},
            {"result_codes", std::move(tables)},
            {"kernel_log_words", kernel_log_scanner_words(kernel_log_text_words(c))}};
}

std::string report_text(const std::string& source, const KernelLog& log, const std::vector<Finding>& findings,
                        const std::vector<std::string>& unrecognised, const std::vector<std::string>& notes) {
    std::string out = fmt::format("{}: {} line(s) read ({}); {} finding(s)\n", source, log.lines_read,
                                  log.format == KernelLogFormat::unknown ? "no time prefix" : to_string(log.format),
                                  findings.size());
    for (auto& n : notes) out += fmt::format("  note: {}\n", n);
    for (auto& f : findings) {
        out += fmt::format("\n{:<7} {} [{}]\n  {}\n", to_string(f.severity), f.id, to_string(f.layer), f.message);
        for (auto& g : f.subjects) out += fmt::format("  GPU: {}\n", describe(g));
        for (auto& e : f.evidence) out += fmt::format("  evidence: {}: {}\n", e.source, e.value);
        if (!f.next_step.empty()) out += fmt::format("  next step: {}\n", f.next_step);
    }
    if (findings.empty()) out += "\nNothing in it that gpudx recognises as a problem.\n";
    if (!unrecognised.empty()) {
        out += fmt::format("\n{} NVRM/amdgpu/kfd line(s) gpudx does not recognise (please report them):\n",
                           unrecognised.size());
        for (size_t i = 0; i < unrecognised.size() && i < kUnrecognisedShown; ++i)
            out += fmt::format("  {}\n", unrecognised[i]);
        if (unrecognised.size() > kUnrecognisedShown)
            out += fmt::format("  ... and {} more (--format json lists all)\n", unrecognised.size() - kUnrecognisedShown);
    }
    return out;
}

int run_explain(const ExplainCmdOptions& o) {
    SignatureCatalogue site;
    const SignatureCatalogue* catalogue = &builtin_signature_catalogue();
    if (!o.signatures_file.empty()) {
        auto c = load_signature_catalogue_file(o.signatures_file);
        if (!c) throw UsageError{c.error().message};
        site = std::move(*c);
        catalogue = &site;
    }
    std::vector<ResultCodeTable> site_tables;
    // Null: the built-in tables, read only if a kept line may name a code.
    const std::vector<ResultCodeTable>* result_tables = nullptr;
    if (!o.error_code_files.empty()) {
        auto t = result_code_tables_with_site(o.error_code_files);
        if (!t) throw UsageError{t.error().message};
        site_tables = std::move(*t);
        result_tables = &site_tables;
    }
    if (o.list) {
        const auto& tables = result_tables ? *result_tables : builtin_result_code_tables();
        if (o.format == "json") write_output("", list_json(*catalogue, tables).dump(2) + "\n", OutputKind::data);
        else write_output("", list_text(*catalogue, tables), OutputKind::text);
        return 0;
    }
    if (o.text && !o.file.empty()) throw UsageError{"explain: give a FILE or --text, not both"};
    XidPolicy xid_policy;
    DiagnoseOptions dopts;
    dopts.signatures = catalogue;
    dopts.result_codes = result_tables;
    if (!o.xid_policy_file.empty()) {
        auto p = load_xid_policy_file(o.xid_policy_file);
        if (!p) throw UsageError{p.error().message};
        xid_policy = std::move(*p);
        dopts.xid_policy = &xid_policy;
    }

    TextReading reading(*catalogue, dopts);
    KernelLogScanner scanner(scan_options(*catalogue, reading));
    std::string source;
    read_input(o, scanner, source);
    auto log = scanner.finish(source);
    if (!log) throw UsageError{log.error().message};
    if (log->lines_read == 0) throw UsageError{source + ": empty, nothing to explain"};

    Snapshot s;
    if (o.here) {
        NodeOptions node = o.node;
        node.signatures = catalogue;
        s = collect_node(node);
        std::erase_if(s.collectors, [](auto& c) { return c.name == to_string(Collector::kernel_log); });
    } else {
        // Without the node, the text itself is the only place that names a GPU's UUID.
        for (auto& [pci, uuid] : reading.uuids.found()) {
            NvidiaProcGpu g;
            g.address = pci;
            g.uuid = uuid;
            s.module.nvidia_gpus.push_back(std::move(g));
        }
    }
    s.kernel_log = std::move(*log);
    s.collectors.push_back(status_ok(Collector::kernel_log));
    for (const auto& x : s.kernel_log.xids) reading.rules.add_borrowed_xid(x);
    reading.rules.finish();

    std::vector<Finding> findings;
    std::vector<std::string> unrecognised;
    CheckContext ctx{s, dopts};
    check_kernel_log_text(ctx, findings, &unrecognised, &reading.rules);
    fold_consequences(findings);  // one story told by several lines is one finding
    if (reading.job_context_line) add_job_context_steps(*reading.job_context_line, findings);
    std::erase_if(unrecognised, [](const std::string& line) { return is_job_context_line(line); });
    std::stable_sort(findings.begin(), findings.end(), [](auto& a, auto& b) { return a.severity > b.severity; });
    int code = exit_code_of(findings);

    std::vector<std::string> notes = scanner.notes();
    if (o.format == "json") {
        nlohmann::json j{{"source", source},
                         {"format", to_string(s.kernel_log.format)},
                         {"lines_read", s.kernel_log.lines_read},
                         {"lines_skipped", s.kernel_log.lines_skipped},
                         {"catalogue_version", catalogue->version},
                         {"checked_against_node", o.here},
                         {"notes", notes},
                         {"exit_code", code}};
        j["findings"] = nlohmann::json::array();
        for (auto& f : findings) j["findings"].push_back(finding_to_json(f));
        j["unrecognised"] = {{"count", unrecognised.size()}, {"lines", unrecognised}};
        write_output("", j.dump(2) + "\n", OutputKind::data);
    } else {
        write_output("", report_text(source, s.kernel_log, findings, unrecognised, notes), OutputKind::text);
    }
    return code;
}

CommandRegistrar register_explain{
    {"explain", "Explain pasted text (kernel log, journal, container or program errors): what failed, where, what next", 65,
     [](CLI::App& cmd) -> std::function<int()> {
         auto o = std::make_shared<ExplainCmdOptions>();
         cmd.add_option("file", o->file,
                        "Text to explain: a file, a pipe or FIFO (<(journalctl -k)), /dev/stdin; - or nothing: "
                        "standard input")
             ->type_name("FILE|-");
         cmd.add_option("--text", o->text, "Explain this text instead of a file")->type_name("STRING");
         cmd.add_option("--format", o->format, "text (default), json")->check(CLI::IsMember({"text", "json"}));
         cmd.add_flag("--here", o->here,
                      "Also read this node's layers (or --root's) and check the text against them: the module and "
                      "libcuda versions for an API mismatch, the driver's CUDA for \"insufficient driver\", the GPUs' UUIDs");
         cmd.add_flag("--list", o->list, "List the signature catalogue (every signature, its meaning and next step) and the GPU libraries' result codes");
         cmd.add_option("--signatures", o->signatures_file,
                        "Site signature catalogue (TOML, format of data/signatures.toml); replaces built-in ids")
             ->type_name("FILE");
         cmd.add_option("--xid-policy", o->xid_policy_file, "Xid severities from this TOML file (data/xid-policy.toml)")
             ->type_name("FILE");
         cmd.add_option("--error-codes", o->error_code_files,
                        "Site result-code table (TOML, format of data/error-codes/*.toml; repeatable): its codes replace the built-in ones of the same name or are added; a name or number that disagrees with the library's header is refused")
             ->type_name("FILE");
         add_node_options(cmd, o->node);
         cmd.footer(
             "Exit codes: 0 nothing recognised is a problem, 1 an error finding, 2 warnings only, 64 usage error\n"
             "(bad option, unreadable or empty input, a site catalogue that does not parse).\n\n"
             "Examples:\n  journalctl -k -b | gpudx explain\n  gpudx explain saved-dmesg.txt --format json\n"
             "  gpudx explain --text 'Failed to initialize NVML: Driver/library version mismatch' --here\n"
             "  gpudx explain --list");
         return [o] { return run_explain(*o); };
     }}};

}  // namespace
}  // namespace gpudx::app
