#include "collect/pcie.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "collect/collectors.hpp"
#include "collect/counter_sample.hpp"
#include "collect/pci_ids.hpp"
#include "core/pci_address.hpp"
#include "core/text.hpp"

namespace gpudx {

std::optional<double> parse_link_speed(std::string_view text) {
    auto fields = split_ws(trim(text));
    if (fields.size() < 2 || fields[1] != "GT/s") return std::nullopt;
    auto v = parse_double(fields[0]);
    if (!v || *v <= 0) return std::nullopt;
    return v;
}

std::map<std::string, uint64_t> parse_aer_counters(std::string_view text) {
    std::map<std::string, uint64_t> out;
    for (auto line : split_lines(text)) {
        // "<name> <count>": the count is the last word. The name is one word since the kernel's short names
        // ("RxErr", "BadTLP"); the kernels that introduced the files (4.19, and distribution kernels built from
        // it) wrote the long ones, with blanks: "Receiver Error 2", "RELAY_NUM Rollover 0".
        auto t = trim(line);
        auto blank = t.find_last_of(" \t");
        if (blank == std::string_view::npos) continue;
        auto name = trim(t.substr(0, blank));
        auto n = parse_uint(t.substr(blank + 1));
        if (name.empty() || !n) continue;
        out[sanitize_utf8(name)] = *n;  // counter names go into the JSON as keys
    }
    return out;
}

std::optional<uint32_t> parse_sysfs_hex(std::string_view text) {
    auto t = trim(text);
    if (!t.starts_with("0x") && !t.starts_with("0X")) return std::nullopt;
    auto v = parse_uint(t.substr(2), 16);
    if (!v || *v > 0xffffffffu) return std::nullopt;
    return static_cast<uint32_t>(*v);
}

PciUevent parse_pci_uevent(std::string_view text) {
    PciUevent u;
    auto pair = [](std::string_view v, std::optional<uint32_t>& a, std::optional<uint32_t>& b) {
        auto parts = split(v, ':');
        if (parts.size() != 2) return;
        auto x = parse_uint(parts[0], 16), y = parse_uint(parts[1], 16);
        if (!x || !y || *x > 0xffff || *y > 0xffff) return;
        a = static_cast<uint32_t>(*x);
        b = static_cast<uint32_t>(*y);
    };
    for (auto line : split_lines(text)) {
        auto eq = line.find('=');
        if (eq == std::string_view::npos) continue;
        auto key = line.substr(0, eq), value = trim(line.substr(eq + 1));
        if (key == "PCI_ID") pair(value, u.vendor_id, u.device_id);
        else if (key == "PCI_SUBSYS_ID") pair(value, u.subsystem_vendor_id, u.subsystem_device_id);
        else if (key == "DRIVER") u.driver = sanitize_utf8(value);
        else if (key == "PCI_CLASS") {
            if (auto c = parse_uint(value, 16); c && *c <= 0xffffff) u.class_code = static_cast<uint32_t>(*c);
        }
    }
    return u;
}

bool is_gpu_class(uint32_t vendor, uint32_t class_code) {
    if (vendor != kVendorNvidia && vendor != kVendorAmd) return false;
    uint32_t base_sub = class_code >> 8;
    if (base_sub == 0x0300 || base_sub == 0x0302 || base_sub == 0x0380) return true;
    // AMD Instinct accelerators from MI300 on report processing-accelerator class (0x1200) instead of display.
    return vendor == kVendorAmd && base_sub == 0x1200;
}

bool is_nvswitch_class(uint32_t vendor, uint32_t class_code) {
    return vendor == kVendorNvidia && (class_code >> 8) == 0x0680;
}

std::string parent_from_sysfs_path(std::string_view path) {
    auto parts = split(path, '/');
    // The last component is the device itself; the one before is its bridge when it is a PCI address.
    std::vector<std::string_view> nonempty;
    for (auto p : parts)
        if (!p.empty()) nonempty.push_back(p);
    if (nonempty.size() < 2) return {};
    auto up = PciAddress::parse(nonempty[nonempty.size() - 2]);
    // "pci0000:00" (a host bridge directory) does not parse: the device sits on a root bus.
    if (!up || nonempty[nonempty.size() - 2].starts_with("pci")) return {};
    return up->str();
}

namespace {

constexpr std::string_view kDevicesDir = "/sys/bus/pci/devices";

struct DeviceReader {
    const Root& root;
    std::vector<ReadProblem>& problems;

    // An attribute's text; absent is normal for most (no link on a legacy device, no AER without the
    // capability), so only an unreadable file, or a required one that is absent, is a problem.
    std::optional<std::string> attr(const std::string& path, bool required = false) const {
        auto r = root.read_file(path, 64 * 1024);
        if (r) return std::move(*r);
        if (r.error().sys_errno != ENOENT || required) problems.push_back({path, r.error().message});
        return std::nullopt;
    }

    // A counter file, through Root::read_sample so that a capture keeps what each reading saw.
    std::optional<std::string> sample(const std::string& path, Root::Sample which) const {
        auto r = root.read_sample(path, which, 64 * 1024);
        if (r) return std::move(*r);
        if (r.error().sys_errno != ENOENT) problems.push_back({path, r.error().message});
        return std::nullopt;
    }

    // Every AER file of a device: absent files leave their maps empty (not available, never zero).
    AerCounters aer(const std::string& base, Root::Sample which) const {
        AerCounters c;
        if (auto t = sample(base + "aer_dev_fatal", which)) c.fatal = parse_aer_counters(*t);
        if (auto t = sample(base + "aer_dev_nonfatal", which)) c.nonfatal = parse_aer_counters(*t);
        if (auto t = sample(base + "aer_dev_correctable", which)) c.correctable = parse_aer_counters(*t);
        // Root ports (kernel 5.6 on) also count what the whole hierarchy below them reported.
        for (const char* name : {"total_err_cor", "total_err_fatal", "total_err_nonfatal"})
            if (auto t = sample(base + "aer_rootport_" + name, which))
                if (auto n = parse_uint(trim(*t))) c.rootport[name] = *n;
        return c;
    }

    std::optional<uint32_t> hex_attr(const std::string& path, bool required = false) const {
        auto text = attr(path, required);
        if (!text) return std::nullopt;
        auto v = parse_sysfs_hex(*text);
        if (!v) problems.push_back({path, fmt::format("not a hex value: '{}'", sanitize_utf8(trim(*text).substr(0, 40)))});
        return v;
    }

    std::optional<std::string> link_target(const std::string& path) const {
        auto r = root.read_link(path);
        if (r) return sanitize_utf8(link_basename(*r));
        if (r.error().sys_errno != ENOENT) problems.push_back({path, r.error().message});
        return std::nullopt;
    }

    // The sysfs vendor attribute is cached at enumeration; only a read of config space shows a device
    // that stopped answering (all ones). Two bytes through pread, not the whole 4 KiB file: on a VM every
    // config dword read is a trap.
    std::optional<uint16_t> config_vendor(const std::string& path) const {
        // stat() first: it is how a recording root (gpudx gather) learns that the file was used.
        if (!root.exists(path)) return std::nullopt;
        auto host = root.host_path(path);
        if (!host) return std::nullopt;
        int fd = ::open(host->c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0) {
            if (errno != ENOENT && errno != EACCES) problems.push_back({path, std::string("cannot open: ") + std::strerror(errno)});
            return std::nullopt;
        }
        unsigned char b[2];
        ssize_t n = ::pread(fd, b, 2, 0);
        ::close(fd);
        if (n != 2) return std::nullopt;
        return static_cast<uint16_t>(b[0] | (b[1] << 8));
    }
};

bool any_nonzero(const std::map<std::string, uint64_t>& counters) {
    return std::any_of(counters.begin(), counters.end(), [](auto& c) { return c.second != 0; });
}

bool has_aer_files(const PciDevice& d) {
    return !d.aer_fatal.empty() || !d.aer_nonfatal.empty() || !d.aer_correctable.empty() || !d.aer_rootport.empty();
}

// The second AER reading, taken only when the first shows an error on some device: then every device with AER
// files is read again, so growth from zero counts too. A device whose later reading is incomplete keeps none:
// its growth is unknown, and the rules say so rather than call it steady.
void read_later_aer(const CollectContext& ctx, PcieLayer& layer, const DeviceReader& rd) {
    bool errors = std::any_of(layer.devices.begin(), layer.devices.end(), [](const PciDevice& d) {
        return any_nonzero(d.aer_fatal) || any_nonzero(d.aer_nonfatal) || any_nonzero(d.aer_correctable) ||
               any_nonzero(d.aer_rootport);
    });
    if (!errors) return;
    auto interval = wait_for_later_sample(ctx);
    if (!interval) return;
    bool taken = false;
    for (auto& d : layer.devices) {
        if (!has_aer_files(d)) continue;
        AerCounters later = rd.aer(std::string(kDevicesDir) + "/" + d.address + "/", Root::Sample::later);
        bool complete = later.fatal.empty() == d.aer_fatal.empty() && later.nonfatal.empty() == d.aer_nonfatal.empty() &&
                        later.correctable.empty() == d.aer_correctable.empty() &&
                        later.rootport.size() == d.aer_rootport.size();
        if (!complete) continue;
        d.aer_later = std::move(later);
        taken = true;
    }
    if (taken) layer.aer_sample_interval_ms = interval;
}

// /sys/bus/pci/slots/NAME/address holds "dddd:bb:dd" (no function): every function of that device sits in the slot.
std::map<std::string, std::string> read_slots(const Root& root, std::vector<ReadProblem>& problems) {
    std::map<std::string, std::string> by_device;
    auto names = root.list_dir("/sys/bus/pci/slots");
    if (!names) return by_device;
    for (auto& name : *names) {
        std::string path = "/sys/bus/pci/slots/" + name + "/address";
        auto text = root.read_file(path, 4096);
        if (!text) {
            if (text.error().sys_errno != ENOENT) problems.push_back({path, text.error().message});
            continue;
        }
        auto addr = PciAddress::parse(std::string(trim(*text)) + ".0");
        if (addr) by_device[addr->str().substr(0, 10)] = sanitize_utf8(name);
    }
    return by_device;
}

}  // namespace

CollectorStatus collect_pcie(const CollectContext& ctx, PcieLayer& layer) {
    const Root& root = ctx.root;
    auto names = root.list_dir(kDevicesDir);
    if (!names) {
        if (names.error().sys_errno == ENOENT)
            return status_no_data(Collector::pcie, "no PCI bus in this root (sysfs not mounted, or a container without /sys)",
                                  std::string(kDevicesDir));
        return status_error(Collector::pcie, names.error());
    }
    CollectorStatus st = status_ok(Collector::pcie);
    DeviceReader rd{root, st.problems};
    auto slots = read_slots(root, st.problems);

    for (auto& name : *names) {
        auto addr = PciAddress::parse(name);
        if (!addr) {
            st.problems.push_back({sanitize_utf8(std::string(kDevicesDir) + "/" + name), "entry is not a PCI address"});
            continue;
        }
        PciDevice d;
        d.address = addr->str();
        const std::string link = std::string(kDevicesDir) + "/" + name;
        const std::string base = link + "/";
        // uevent carries the ids, class and driver in one read; the separate attributes are the fallback.
        PciUevent u;
        if (auto t = rd.attr(base + "uevent")) u = parse_pci_uevent(*t);
        if (u.vendor_id && u.device_id && u.class_code) {
            d.vendor_id = u.vendor_id;
            d.device_id = u.device_id;
            d.class_code = u.class_code;
            d.subsystem_vendor_id = u.subsystem_vendor_id;
            d.subsystem_device_id = u.subsystem_device_id;
            d.driver = u.driver;
        } else {
            d.vendor_id = rd.hex_attr(base + "vendor", true);
            d.device_id = rd.hex_attr(base + "device", true);
            d.class_code = rd.hex_attr(base + "class", true);
            d.subsystem_vendor_id = rd.hex_attr(base + "subsystem_vendor");
            d.subsystem_device_id = rd.hex_attr(base + "subsystem_device");
            if (auto drv = rd.link_target(base + "driver")) d.driver = *drv;
        }
        if (auto numa = rd.attr(base + "numa_node")) {
            if (auto n = parse_int(trim(*numa)); n && *n >= -1 && *n < (1 << 20)) d.numa_node = static_cast<int32_t>(*n);
        }
        if (auto it = slots.find(d.address.substr(0, 10)); it != slots.end()) d.slot = it->second;
        // The devices/ entry is a link to the device's place in the tree: its target names the parent bridge.
        if (auto target = root.read_link(link)) d.parent = parent_from_sysfs_path(*target);

        uint32_t vendor = d.vendor_id.value_or(0), cls = d.class_code.value_or(0);
        d.is_gpu = is_gpu_class(vendor, cls);
        d.is_nvswitch = is_nvswitch_class(vendor, cls);
        if (vendor == 0xffff) d.config_unreadable = true;

        // Link, AER, IOMMU and revision only for the devices GPU health depends on (GPU vendors' functions
        // and bridges): a large server has hundreds of functions and each attribute is a syscall round.
        bool detail = vendor == kVendorNvidia || vendor == kVendorAmd || (cls >> 16) == 0x06;
        if (detail) {
            d.revision = rd.hex_attr(base + "revision");
            if (auto t = rd.attr(base + "current_link_speed")) {
                d.link_current.speed_text = sanitize_utf8(trim(*t));
                d.link_current.speed_gts = parse_link_speed(*t);
            }
            if (auto t = rd.attr(base + "max_link_speed")) {
                d.link_max.speed_text = sanitize_utf8(trim(*t));
                d.link_max.speed_gts = parse_link_speed(*t);
            }
            // A width of 0 means the link is down or not trained: keep it, it is the evidence.
            if (auto t = rd.attr(base + "current_link_width"))
                if (auto w = parse_uint(trim(*t)); w && *w <= 64) d.link_current.width = static_cast<uint32_t>(*w);
            if (auto t = rd.attr(base + "max_link_width"))
                if (auto w = parse_uint(trim(*t)); w && *w <= 64) d.link_max.width = static_cast<uint32_t>(*w);
            AerCounters aer = rd.aer(base, Root::Sample::first);
            d.aer_fatal = std::move(aer.fatal);
            d.aer_nonfatal = std::move(aer.nonfatal);
            d.aer_correctable = std::move(aer.correctable);
            d.aer_rootport = std::move(aer.rootport);
            if (auto g = rd.link_target(base + "iommu_group"))
                if (auto n = parse_uint(*g); n && *n <= 0xffffffffu) d.iommu_group = static_cast<uint32_t>(*n);
        }
        // Config space is read only for the devices rules care about, to keep the collector cheap.
        if (d.is_gpu || d.is_nvswitch) {
            if (auto cv = rd.config_vendor(base + "config"); cv && *cv == 0xffff) d.config_unreadable = true;
        }
        layer.devices.push_back(std::move(d));
    }
    std::sort(layer.devices.begin(), layer.devices.end(),
              [](const PciDevice& a, const PciDevice& b) { return a.address < b.address; });
    read_later_aer(ctx, layer, rd);

    std::vector<std::pair<uint16_t, uint16_t>> wanted;
    for (auto& d : layer.devices) {
        if (d.is_gpu) layer.gpus.push_back(d.address);
        if (d.is_nvswitch) layer.nvswitches.push_back(d.address);
        if (d.vendor_id && d.device_id && *d.vendor_id <= 0xffff && *d.device_id <= 0xffff)
            wanted.emplace_back(static_cast<uint16_t>(*d.vendor_id), static_cast<uint16_t>(*d.device_id));
    }
    std::sort(wanted.begin(), wanted.end());
    wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
    auto ids = lookup_pci_ids(root, wanted);
    for (auto& d : layer.devices) {
        if (!d.vendor_id || !d.device_id) continue;
        auto v = static_cast<uint16_t>(*d.vendor_id), dev = static_cast<uint16_t>(*d.device_id);
        if (auto it = ids.vendors.find(v); it != ids.vendors.end()) d.vendor_name = it->second;
        if (auto it = ids.devices.find({v, dev}); it != ids.devices.end()) d.device_name = it->second;
    }
    if (layer.devices.empty()) {
        st.state = CollectorState::no_data;
        st.message = "no PCI devices listed";
        st.path = std::string(kDevicesDir);
    } else if (std::none_of(layer.devices.begin(), layer.devices.end(),
                            [](const PciDevice& d) { return d.vendor_id && d.class_code; })) {
        // Listed but not one identifiable (unreadable sysfs): an error, never "no GPU on the bus".
        st.state = CollectorState::error;
        st.message = fmt::format("could not read the vendor or class of any of the {} PCI devices listed{}",
                                 layer.devices.size(), st.problems.empty() ? "" : ": " + st.problems.front().message);
        st.path = st.problems.empty() ? std::string(kDevicesDir) : st.problems.front().path;
    }
    return st;
}

}  // namespace gpudx
