#include "collect/services.hpp"

#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

#include <fmt/format.h>

#include "collect/collectors.hpp"
#include "core/spawn.hpp"
#include "core/text.hpp"

namespace gpudx {

std::vector<SystemdUnit> parse_systemctl_show(std::string_view text) {
    std::vector<SystemdUnit> out;
    SystemdUnit unit;
    auto finish = [&] {
        if (!unit.properties.empty()) {
            unit.name = std::string(unit.property("Id"));
            if (!unit.name.empty()) out.push_back(std::move(unit));
        }
        unit = {};
    };
    for (auto line : split_lines(text)) {
        if (trim(line).empty()) {
            finish();
            continue;
        }
        auto eq = line.find('=');
        if (eq == std::string_view::npos || eq == 0) continue;
        unit.properties[sanitize_utf8(line.substr(0, eq))] = sanitize_utf8(line.substr(eq + 1));
    }
    finish();
    return out;
}

std::string format_systemctl_show(const std::vector<SystemdUnit>& units) {
    std::string out;
    for (auto& u : units) {
        if (!out.empty()) out += '\n';
        for (auto& [k, v] : u.properties) out += fmt::format("{}={}\n", k, v);
    }
    return out;
}

namespace {

// systemctl answers from PID 1 over D-Bus in milliseconds; a hung systemd must not hang the diagnosis.
constexpr std::chrono::milliseconds kSystemctlDeadline{3000};

Result<std::string> ask_systemctl(const std::vector<std::string>& units) {
    std::vector<std::string> argv = {"systemctl", "show", "--no-pager", "-p", std::string(kSystemdProperties)};
    argv.insert(argv.end(), units.begin(), units.end());
    SpawnOptions o;
    o.search_path = true;
    o.stderr_to = SpawnOptions::Stderr::discard;
    auto program = SpawnedProgram::start(argv, o);
    if (!program) return std::unexpected(program.error());
    std::string out;
    auto deadline = std::chrono::steady_clock::now() + kSystemctlDeadline;
    for (;;) {
        auto r = program->read_until(out, deadline);
        if (r == SpawnedProgram::Read::closed) break;
        if (r == SpawnedProgram::Read::failed) return fail("could not read systemctl's output", "systemctl");
        if (std::chrono::steady_clock::now() >= deadline) {
            program->kill();
            return std::unexpected(Error{fmt::format("systemctl show did not answer within {} ms", kSystemctlDeadline.count()),
                                         "systemctl", ETIMEDOUT});
        }
    }
    auto status = program->wait(std::chrono::milliseconds(500));
    if (!status) {
        program->kill();
        return std::unexpected(Error{"systemctl show did not exit", "systemctl", ETIMEDOUT});
    }
    // Not booted with systemd (a container), or no systemctl: "could not evaluate", never "not running".
    if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0)
        return fail("systemctl show " + describe_exit_status(*status), "systemctl");
    return out;
}

}  // namespace

CollectorStatus collect_services(const CollectContext& ctx, const PcieLayer& pcie, const DevicesLayer& devices,
                                 ServicesLayer& layer) {
    if (!has_nvswitch(pcie, devices))
        return status_no_data(Collector::services, "no NVSwitch on this node: the fabric manager is not needed, not asked");
    std::vector<std::string> units = {std::string(kFabricManagerUnit), std::string(kImexUnit)};
    std::string text;
    if (ctx.root.is_live()) {
        auto answer = ask_systemctl(units);
        if (!answer) {
            auto st = status_error(Collector::services, answer.error());
            if (answer.error().sys_errno == ETIMEDOUT) st.state = CollectorState::timed_out;
            return st;
        }
        text = std::move(*answer);
        layer.source = "systemctl show";
    } else {
        auto recorded = ctx.root.read_file(kSystemctlShowRecord, 1 << 20);
        if (!recorded) {
            if (recorded.error().sys_errno == ENOENT)
                return status_no_data(Collector::services,
                                      "this capture holds no record of systemctl (made before gpudx gather kept one)",
                                      std::string(kSystemctlShowRecord));
            return status_error(Collector::services, recorded.error());
        }
        text = std::move(*recorded);
        layer.source = std::string(kSystemctlShowRecord);
    }
    auto answered = parse_systemctl_show(text);
    // In the order asked; a unit systemctl did not print is left out (the rules then say "not known").
    for (auto& name : units)
        for (auto& u : answered)
            if (u.name == name) layer.units.push_back(u);
    if (layer.units.empty()) {
        CollectorStatus st = status_error(Collector::services, Error{"systemctl show printed no unit", layer.source, 0});
        return st;
    }
    return status_ok(Collector::services);
}

}  // namespace gpudx
