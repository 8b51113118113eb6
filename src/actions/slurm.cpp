#include "actions/slurm.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "core/spawn.hpp"
#include "core/text.hpp"

namespace gpudx {

std::optional<SlurmNodeState> parse_scontrol_show_node(std::string_view text) {
    SlurmNodeState n;
    bool seen_node = false, seen_state = false;
    for (auto line : split_lines(text)) {
        auto t = trim(line);
        // Reason takes the rest of its line and may hold blanks or '=': never split it into tokens.
        if (t.starts_with("Reason=")) {
            std::string_view r = t.substr(7);
            // Slurm appends " [user@time]" to show who set the reason and when.
            if (r.ends_with("]")) {
                auto open = r.rfind(" [");
                if (open != std::string_view::npos && r.find('@', open) != std::string_view::npos) r = r.substr(0, open);
            }
            n.reason = std::string(trim(r));
            continue;
        }
        for (auto tok : split_ws(t)) {
            if (tok.starts_with("NodeName=")) {
                if (seen_node) return seen_state ? std::optional(n) : std::nullopt;  // a second node: stop
                seen_node = true;
                n.name = std::string(tok.substr(9));
            } else if (tok.starts_with("State=")) {
                seen_state = true;
                n.state = std::string(tok.substr(6));
            }
        }
    }
    if (!seen_node || !seen_state) return std::nullopt;
    for (auto flag : split(n.state, '+')) {
        std::string f = std::string(flag);
        while (!f.empty() && (f.back() == '*' || f.back() == '~' || f.back() == '#' || f.back() == '$' ||
                              f.back() == '@' || f.back() == '%' || f.back() == '!' || f.back() == '^'))
            f.pop_back();
        if (f == "DRAIN" || f == "DRAINED" || f == "DRAINING") n.drain = true;
        if (f == "DOWN") n.down = true;
    }
    // An admin's reason of "none" clears it in Slurm; show prints nothing or "(null)" for no reason.
    if (n.reason == "(null)" || n.reason == "none") n.reason.clear();
    return n;
}

const char* to_string(SlurmAction a) {
    switch (a) {
        case SlurmAction::none: return "none";
        case SlurmAction::drain: return "drain";
        case SlurmAction::resume: return "resume";
        case SlurmAction::leave_foreign: return "leave_foreign";
        case SlurmAction::unknown: return "unknown";
    }
    return "?";
}

SlurmAction decide_slurm_action(int diagnosis_exit_code, const std::optional<SlurmReason>& reason,
                                const SlurmNodeState& node) {
    // Could not evaluate: too little known to take a node out of service or to put it back.
    if (diagnosis_exit_code == 3) return SlurmAction::unknown;
    bool ours = node.gpudx_reason().has_value();
    // Any reason that is not ours belongs to someone (an admin, Slurm itself for a node not responding):
    // overwriting it would lose their note, and a later resume would undo their decision.
    bool foreign = !node.reason.empty() && !ours;
    if (reason) {
        if (foreign) return SlurmAction::leave_foreign;
        // Compared as Slurm holds it: the text.
        if (ours && node.drain && node.reason == reason->format()) return SlurmAction::none;
        return SlurmAction::drain;
    }
    if (ours && node.drain) return SlurmAction::resume;
    return SlurmAction::none;
}

std::string default_slurm_node_name(const std::map<std::string, std::string>& env) {
    if (auto it = env.find("SLURMD_NODENAME"); it != env.end() && !it->second.empty()) return it->second;
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) != 0) return {};
    std::string h = host;
    // Slurm node names are the short host name unless gres/slurm.conf say otherwise; --node covers that.
    if (auto dot = h.find('.'); dot != std::string::npos) h.resize(dot);
    return h;
}

Result<ProcessResult> run_process(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
    if (argv.empty()) return fail("no command to run");
    // Its own process group (SpawnedProgram's default), so a timeout kills whatever it started too (a wrapper
    // script's children).
    auto child = SpawnedProgram::start(argv, {.stderr_to = SpawnOptions::Stderr::pipe, .search_path = true});
    if (!child) return std::unexpected(child.error());
    constexpr size_t kKeptOutput = 1u << 20;
    ProcessResult r;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    auto timed_out = [&] {
        child->kill();
        return fail(fmt::format("did not finish within {:.0f} s (killed)", timeout.count() / 1000.0), argv[0]);
    };
    for (;;) {
        auto got = child->read_until(r.output, deadline);
        if (r.output.size() > kKeptOutput) r.output.resize(kKeptOutput);
        if (got == SpawnedProgram::Read::nothing) return timed_out();
        if (got != SpawnedProgram::Read::data) break;
    }
    // Its output closed: it is ending (or left a child holding nothing of ours); what is left of the deadline.
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    auto status = child->wait(std::max(left, std::chrono::milliseconds(100)));
    if (!status) return timed_out();
    r.exit_status = WIFEXITED(*status) ? WEXITSTATUS(*status) : 128 + WTERMSIG(*status);
    return r;
}

namespace {

std::string one_line(std::string_view output) {
    std::string s;
    for (auto l : split_lines(output)) {
        auto t = trim(l);
        if (t.empty()) continue;
        s += (s.empty() ? "" : " / ") + std::string(t);
    }
    return strip_control(fit(s, 300));
}

Result<ProcessResult> scontrol(const SlurmDrainOptions& o, std::vector<std::string> args) {
    args.insert(args.begin(), o.scontrol);
    std::string shown;
    for (auto& a : args) shown += (shown.empty() ? "" : " ") + a;
    auto r = run_process(args, o.timeout);
    if (!r) return fail(fmt::format("cannot run `{}`: {}", shown, r.error().message), o.scontrol);
    if (r->exit_status != 0)
        return fail(fmt::format("`{}` failed (exit {}): {}", shown, r->exit_status,
                                r->output.empty() ? std::string("no output") : one_line(r->output)),
                    o.scontrol);
    return r;
}

}  // namespace

Result<SlurmNodeState> read_slurm_node(const SlurmDrainOptions& o) {
    if (o.node.empty()) return fail("no Slurm node name: pass --node NAME");
    auto shown = scontrol(o, {"show", "node", o.node});
    if (!shown) return std::unexpected(shown.error());
    auto node = parse_scontrol_show_node(shown->output);
    if (!node)
        return fail(fmt::format("`{} show node {}` printed no node state: {}", o.scontrol, o.node, one_line(shown->output)),
                    o.scontrol);
    return *node;
}

Result<SlurmDrainResult> apply_slurm_drain(const SlurmDrainOptions& o, int diagnosis_exit_code,
                                           const std::optional<SlurmReason>& reason) {
    auto node = read_slurm_node(o);
    if (!node) return std::unexpected(node.error());
    SlurmDrainResult res;
    res.before = *node;
    res.action = decide_slurm_action(diagnosis_exit_code, reason, *node);
    if (res.action == SlurmAction::drain && !o.update_own_reason && node->drain && node->gpudx_reason())
        res.action = SlurmAction::none;
    std::string text = reason ? reason->format() : std::string();
    switch (res.action) {
        case SlurmAction::drain: {
            auto r = scontrol(o, {"update", "nodename=" + o.node, "state=drain", "reason=" + text});
            if (!r) return std::unexpected(r.error());
            res.message = fmt::format("drained Slurm node {} (was {}): {}", o.node, node->state, text);
            break;
        }
        case SlurmAction::resume: {
            auto r = scontrol(o, {"update", "nodename=" + o.node, "state=resume"});
            if (!r) return std::unexpected(r.error());
            res.message = fmt::format("resumed Slurm node {}: healthy again, it was drained by gpudx ({})", o.node,
                                      node->reason);
            break;
        }
        case SlurmAction::leave_foreign:
            res.message = fmt::format("Slurm node {} ({}) already carries another reason, left as it is: {}", o.node,
                                      node->state, node->reason);
            break;
        case SlurmAction::unknown:
            res.message = fmt::format("Slurm node {} left as it is ({}): gpudx could not evaluate this node", o.node,
                                      node->state);
            break;
        case SlurmAction::none:
            res.message = !reason
                              ? fmt::format("Slurm node {} ({}): nothing to do", o.node, node->state)
                              : fmt::format("Slurm node {} already drained by gpudx for this reason", o.node);
            break;
    }
    return res;
}

std::vector<int> parse_scontrol_listpids(std::string_view text, std::string_view job) {
    std::vector<int> pids;
    for (auto line : split_lines(text)) {
        auto f = split_ws(line);
        if (f.size() < 2) continue;
        auto pid = parse_uint(f[0]);
        if (!pid || *pid == 0 || *pid > INT32_MAX) continue;  // the header, or a line that is no row
        if (f[1] != job && !(f[1].starts_with(job) && f[1].size() > job.size() && f[1][job.size()] == '_')) continue;
        pids.push_back(static_cast<int>(*pid));
    }
    std::sort(pids.begin(), pids.end());
    pids.erase(std::unique(pids.begin(), pids.end()), pids.end());
    return pids;
}

namespace {

constexpr int kMaxCgroupDepth = 8;

// Every pid in the cgroup.procs files at and below `dir`.
void cgroup_procs_below(const Root& root, const std::string& dir, int depth, std::vector<int>& pids) {
    if (auto text = root.read_file(dir + "/cgroup.procs", 1 << 20))
        for (auto line : split_lines(*text))
            if (auto pid = parse_uint(trim(line)); pid && *pid > 0 && *pid <= INT32_MAX) pids.push_back(static_cast<int>(*pid));
    if (depth >= kMaxCgroupDepth) return;
    auto names = root.list_dir(dir);
    if (!names) return;
    for (auto& n : *names)
        if (auto st = root.stat(dir + "/" + n); st && st->type == FileType::directory)
            cgroup_procs_below(root, dir + "/" + n, depth + 1, pids);
}

// The job_JOB folders under `dir` (system.slice/slurmstepd.scope/job_N on v2, freezer/slurm/uid_U/job_N on v1).
void find_job_cgroups(const Root& root, const std::string& dir, const std::string& name, int depth,
                      std::vector<std::string>& found) {
    if (depth >= kMaxCgroupDepth) return;
    auto names = root.list_dir(dir);
    if (!names) return;
    for (auto& n : *names) {
        std::string child = dir + "/" + n;
        auto st = root.stat(child);
        if (!st || st->type != FileType::directory) continue;
        if (n == name) found.push_back(child);
        else find_job_cgroups(root, child, name, depth + 1, found);
    }
}

}  // namespace

Result<std::vector<int>> slurm_job_pids(const Root& root, const SlurmJobPidsOptions& o) {
    if (o.job.empty() || !parse_uint(o.job)) return fail("not a Slurm job id: " + o.job);
    std::string tried;
    if (root.is_live()) {
        SlurmDrainOptions so;
        so.scontrol = o.scontrol;
        so.timeout = o.timeout;
        auto r = scontrol(so, {"listpids", o.job});
        if (r) {
            auto pids = parse_scontrol_listpids(r->output, o.job);
            if (!pids.empty()) return pids;
            tried = fmt::format("`{} listpids {}` lists no process of it", o.scontrol, o.job);
        } else {
            tried = r.error().message;
        }
    }
    std::vector<std::string> dirs;
    find_job_cgroups(root, "/sys/fs/cgroup", "job_" + o.job, 0, dirs);
    std::vector<int> pids;
    for (auto& d : dirs) cgroup_procs_below(root, d, 0, pids);
    std::sort(pids.begin(), pids.end());
    pids.erase(std::unique(pids.begin(), pids.end()), pids.end());
    if (!pids.empty()) return pids;
    return fail(fmt::format("no process of Slurm job {} on this node: {}{}", o.job, tried.empty() ? "" : tried + "; ",
                            dirs.empty() ? fmt::format("no cgroup job_{} under /sys/fs/cgroup", o.job)
                                         : fmt::format("its cgroup {} holds no process", dirs.front())));
}

}  // namespace gpudx
