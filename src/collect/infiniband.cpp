#include "collect/infiniband.hpp"

#include <algorithm>
#include <cerrno>

#include <fmt/format.h>

#include "collect/collectors.hpp"
#include "collect/counter_sample.hpp"
#include "core/pci_address.hpp"
#include "core/text.hpp"

namespace gpudx {

IbStateText parse_ib_state(std::string_view text) {
    IbStateText out;
    auto t = trim(text);
    auto colon = t.find(':');
    if (colon != std::string_view::npos) {
        if (auto n = parse_uint(trim(t.substr(0, colon))); n && *n <= 0xffff) out.code = static_cast<uint32_t>(*n);
        t = trim(t.substr(colon + 1));
    }
    out.name = sanitize_utf8(t);
    return out;
}

std::optional<double> parse_ib_rate(std::string_view text) {
    auto fields = split_ws(trim(text));
    if (fields.size() < 2 || fields[1] != "Gb/sec") return std::nullopt;
    auto v = parse_double(fields[0]);
    if (!v || *v < 0) return std::nullopt;
    return v;
}

namespace {

constexpr std::string_view kClassDir = "/sys/class/infiniband";

struct PortReader {
    const Root& root;
    std::vector<ReadProblem>& problems;

    // Absent attributes are normal (a driver that does not offer one): only an unreadable one is a problem.
    std::optional<std::string> attr(const std::string& path) const {
        auto r = root.read_file(path, 4096);
        if (r) return std::move(*r);
        if (r.error().sys_errno != ENOENT) problems.push_back({path, r.error().message});
        return std::nullopt;
    }

    std::string word(const std::string& path) const {
        auto t = attr(path);
        return t ? sanitize_utf8(trim(*t)) : std::string();
    }

    // The port's error counters, each its own file; `names` from the first reading's listing. `unread` gets why
    // the first counter that could not be read was not (a file listed but unreadable is not "no errors").
    std::map<std::string, uint64_t> counters(const std::string& dir, const std::vector<std::string>& names,
                                             Root::Sample which, std::string* unread = nullptr) const {
        std::map<std::string, uint64_t> out;
        auto note = [&](const std::string& path, const std::string& name, const std::string& why) {
            problems.push_back({path, why});
            if (unread && unread->empty()) *unread = "counters/" + name + ": " + why;
        };
        for (auto& name : names) {
            std::string path = dir + "/" + name;
            auto r = root.read_sample(path, which, 4096);
            if (!r) {
                // A replayed capture that recorded no second reading answers it ENOENT: growth is then unknown
                // (the caller keeps no later reading), which is not a problem of this file.
                if (which == Root::Sample::later && r.error().sys_errno == ENOENT) continue;
                // The kernel answers a counter its PMA query failed for with an error (EINVAL, EIO) rather than
                // a number; ENOENT here is a file gone between listing and reading.
                note(path, name, r.error().message);
                continue;
            }
            // Kernels before 5.x answered "N/A (no PMA)" for a counter they cannot read: not a number, not zero.
            if (auto n = parse_uint(trim(*r))) out[name] = *n;
            else note(path, name, fmt::format("not a counter: '{}'", sanitize_utf8(trim(*r).substr(0, 40))));
        }
        return out;
    }
};

// The network interface of a RoCE port: the one of its first GID (gid_attrs/ndevs/0); failing that (a kernel
// before gid_attrs, a GID table not filled yet, which the kernel answers with EINVAL), the only interface of the
// adapter's PCI function (device/net/), which is the port's on a one-port function.
std::string roce_netdev(const PortReader& rd, const std::string& device_dir, const std::string& port_dir) {
    auto r = rd.root.read_file(port_dir + "/gid_attrs/ndevs/0", 4096);
    if (r) {
        if (auto name = sanitize_utf8(trim(*r)); !name.empty()) return name;
    } else if (r.error().sys_errno != ENOENT && r.error().sys_errno != EINVAL) {
        rd.problems.push_back({port_dir + "/gid_attrs/ndevs/0", r.error().message});
    }
    if (auto nets = rd.root.list_dir(device_dir + "/device/net"); nets && nets->size() == 1) return sanitize_utf8(nets->front());
    return {};
}

IbPort read_port(const PortReader& rd, const std::string& device_dir, const std::string& dir, uint32_t number) {
    IbPort p;
    p.port = number;
    if (auto t = rd.attr(dir + "/state")) {
        auto s = parse_ib_state(*t);
        p.state_code = s.code;
        p.state = std::move(s.name);
    }
    if (auto t = rd.attr(dir + "/phys_state")) {
        auto s = parse_ib_state(*t);
        p.phys_state_code = s.code;
        p.phys_state = std::move(s.name);
    }
    if (auto t = rd.attr(dir + "/rate")) {
        p.rate = sanitize_utf8(trim(*t));
        p.rate_gbps = parse_ib_rate(*t);
    }
    p.link_layer = rd.word(dir + "/link_layer");
    // RoCE: the first GID's network interface is the port's netdev (InfiniBand ports have none).
    if (p.link_layer == "Ethernet") p.netdev = roce_netdev(rd, device_dir, dir);
    // A port whose counters cannot be read is "could not evaluate" (ib.counters_not_read), never a clean port.
    if (auto names = rd.root.list_dir(dir + "/counters")) {
        std::vector<std::string> counter_names;
        for (auto& n : *names)
            if (is_ib_error_counter(n)) counter_names.push_back(n);
        p.counters = rd.counters(dir + "/counters", counter_names, Root::Sample::first, &p.counters_unread);
        if (p.counters_unread.empty() && std::none_of(counter_names.begin(), counter_names.end(), is_ib_link_error_counter))
            p.counters_unread = "none of the link error counters offered (only congestion counters)";
    } else if (names.error().sys_errno == ENOENT) {
        p.counters_unread = "no counters/ directory (the driver offers no port counters)";
    } else {
        rd.problems.push_back({dir + "/counters", names.error().message});
        p.counters_unread = "counters/: " + names.error().message;
    }
    return p;
}

// Only the judged counters call for a second reading: the congestion counters (port_xmit_discards ...) are above
// zero on any busy fabric, and a healthy node would wait --health-interval on every diagnosis for counters that
// are not judged.
bool any_error(const IbPort& p) {
    for (auto& [name, n] : p.counters)
        if (n && is_ib_link_error_counter(name)) return true;
    return false;
}

}  // namespace

CollectorStatus collect_infiniband(const CollectContext& ctx, InfinibandLayer& layer) {
    const Root& root = ctx.root;
    auto names = root.list_dir(kClassDir);
    if (!names) {
        if (names.error().sys_errno == ENOENT)
            return status_no_data(Collector::infiniband,
                                  "no InfiniBand or RoCE device (no RDMA driver loaded, or a node without HCAs)",
                                  std::string(kClassDir));
        return status_error(Collector::infiniband, names.error());
    }
    CollectorStatus st = status_ok(Collector::infiniband);
    PortReader rd{root, st.problems};
    for (auto& name : *names) {
        IbDevice dev;
        dev.name = sanitize_utf8(name);
        const std::string base = std::string(kClassDir) + "/" + name;
        // The device link names the PCI function ("../../../0000:17:00.0"); software devices (rxe) have none.
        if (auto target = root.read_link(base + "/device")) {
            if (auto addr = PciAddress::parse(link_basename(*target))) dev.pci = addr->str();
        } else if (target.error().sys_errno != ENOENT) {
            st.problems.push_back({base + "/device", target.error().message});
        }
        dev.hca_type = rd.word(base + "/hca_type");
        dev.board_id = rd.word(base + "/board_id");
        dev.fw_ver = rd.word(base + "/fw_ver");
        dev.node_guid = rd.word(base + "/node_guid");
        if (auto ports = root.list_dir(base + "/ports")) {
            for (auto& port : *ports) {
                auto n = parse_uint(port);
                if (!n || *n > 0xffff) continue;
                dev.ports.push_back(read_port(rd, base, base + "/ports/" + port, static_cast<uint32_t>(*n)));
            }
            std::sort(dev.ports.begin(), dev.ports.end(), [](const IbPort& a, const IbPort& b) { return a.port < b.port; });
        } else {
            st.problems.push_back({base + "/ports", ports.error().message});
        }
        layer.devices.push_back(std::move(dev));
    }

    // The second reading, only when the first shows errors on some port (counter_sample.hpp says why).
    bool errors = false;
    for (auto& d : layer.devices)
        for (auto& p : d.ports) errors = errors || any_error(p);
    if (errors) {
        if (auto interval = wait_for_later_sample(ctx)) {
            bool taken = false;
            for (size_t i = 0; i < layer.devices.size(); ++i) {
                auto& dev = layer.devices[i];
                for (auto& p : dev.ports) {
                    if (p.counters.empty()) continue;
                    std::string dir = fmt::format("{}/{}/ports/{}/counters", kClassDir, (*names)[i], p.port);
                    // The counters the first reading found, asked again.
                    std::vector<std::string> asked;
                    for (auto& [name, n] : p.counters) asked.push_back(name);
                    auto later = rd.counters(dir, asked, Root::Sample::later);
                    // An incomplete later reading keeps none: growth unknown, never "steady".
                    if (later.size() != p.counters.size()) continue;
                    p.counters_later = std::move(later);
                    taken = true;
                }
            }
            if (taken) layer.sample_interval_ms = interval;
        }
    }
    return st;
}

}  // namespace gpudx
