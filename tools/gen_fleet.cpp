// gpudx_gen_fleet: writes N snapshots of a made-up fleet of 2xH200 nodes, derived from the captured node of
// tests/fixtures/h200x2, with seeded drift (other driver, kernel and VBIOS versions, missing GPUs, Xids,
// degraded links, hosts no class covers) and a manifest of the answers a fleet report must give.
// Same seed, same files: node i depends only on (seed, i), so the first 50 of 10,000 equal a run of 50.
//
//   gpudx_gen_fleet --seed 7 --count 50 --bad 2 --out DIR   ->  DIR/nodes/*.json, DIR/manifest.json
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "h200x2_snapshot.hpp"
#include "model/snapshot.hpp"

namespace {

using namespace gpudx;
using json = nlohmann::json;

// splitmix64: defined output on every platform (the standard distributions are not).
struct Rng {
    uint64_t state;
    uint64_t next() {
        uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    // Uniform in [0, n) (the tiny modulo bias does not matter here).
    uint64_t below(uint64_t n) { return next() % n; }
    bool chance(unsigned per_mille) { return below(1000) < per_mille; }
    template <class T>
    const T& pick(const std::vector<std::pair<T, unsigned>>& weighted) {
        unsigned total = 0;
        for (auto& [v, w] : weighted) total += w;
        uint64_t r = below(total);
        for (auto& [v, w] : weighted) {
            if (r < w) return v;
            r -= w;
        }
        return weighted.back().first;
    }
};

std::string uuid_from(Rng& rng) {
    uint64_t a = rng.next(), b = rng.next();
    return fmt::format("GPU-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", a >> 32, (a >> 16) & 0xffff, a & 0xffff, b >> 48,
                       b & 0xffffffffffffull);
}

struct Drift {
    std::string hostname;
    bool classified = true;
    std::string driver = testdata::kDriver;
    std::string kernel = testdata::kKernel;
    std::optional<int> cuda = 13000;
    std::vector<std::string> missing;        // PCI addresses removed
    std::map<std::string, std::string> vbios;  // PCI address -> other VBIOS
    std::vector<std::string> link_degraded;
    std::vector<std::pair<std::string, int>> xids;  // (pci, code)
};

const std::vector<std::pair<int, unsigned>> kXidCodes = {{13, 30}, {31, 25}, {43, 20}, {48, 3}, {63, 8},
                                                         {74, 4},  {79, 3},  {94, 3},  {119, 4}};

std::string xid_text(int code) {
    switch (code) {
        case 13: return "Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0): Out Of Range Address";
        case 31: return "Ch 00000008, intr 10000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f3a_12340000.";
        case 43: return "Ch 00000010";
        case 48: return "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer.";
        case 63: return "Row Remapper: New row (0x0000000000001234) Marked for Remapping, reset gpu to activate.";
        case 74: return "NVLink: fatal error detected on link 4(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)";
        case 79: return "GPU has fallen off the bus.";
        case 94: return "Contained: SM (0x1). RST: No, D-RST: No";
        case 119: return "Timeout after 6s of waiting for RPC response from GPU0 GSP!";
        default: return "";
    }
}

std::string hostname_of(uint64_t i) {
    char rack = static_cast<char>('a' + i / 999);
    return fmt::format("gpu-{}{:03}", rack, i % 999 + 1);
}

Drift drift_for(uint64_t seed, uint64_t i) {
    Rng rng{seed * 0x100000001b3ull ^ (i + 1) * 0x9e3779b97f4a7c15ull};
    Drift d;
    d.hostname = hostname_of(i);
    if (rng.chance(10)) {  // 1 %: a lab machine no class covers
        d.hostname = fmt::format("lab-{:04}", i);
        d.classified = false;
    }
    unsigned r = static_cast<unsigned>(rng.below(1000));
    if (r < 40) {
        d.driver = "580.126.09";  // same branch, not the tested build
    } else if (r < 50) {
        d.driver = "570.172.08";  // another branch, with its CUDA
        d.cuda = 12080;
    }
    r = static_cast<unsigned>(rng.below(1000));
    if (r < 30)
        d.kernel = "6.18.40-fc-v650-gpu";
    else if (r < 40)
        d.kernel = "6.18.44-fc-v658-gpu";
    const std::vector<std::string> gpus = {testdata::kGpu0Pci, testdata::kGpu1Pci};
    if (rng.chance(20)) d.vbios[gpus[rng.below(2)]] = "96.00.a5.00.19";
    if (rng.chance(20)) d.missing.push_back(gpus[rng.below(2)]);
    if (rng.chance(10)) d.link_degraded.push_back(gpus[rng.below(2)]);
    if (rng.chance(80)) {
        unsigned events = 1 + static_cast<unsigned>(rng.below(4));
        for (unsigned e = 0; e < events; ++e) {
            std::string pci = gpus[rng.below(2)];
            if (!d.missing.empty() && d.missing.front() == pci) pci = pci == gpus[0] ? gpus[1] : gpus[0];
            d.xids.emplace_back(pci, rng.pick(kXidCodes));
        }
    }
    return d;
}

Snapshot apply(const Snapshot& base, const Drift& d, uint64_t seed, uint64_t i) {
    Snapshot s = base;
    Rng rng{seed ^ (i + 1) * 0xd1b54a32d192ed03ull};
    s.host.hostname = d.hostname;
    s.host.kernel_release = d.kernel;
    s.module.kernel_release = d.kernel;
    s.host.boot_id = fmt::format("{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}", rng.next() >> 32, rng.below(0x10000),
                                 rng.below(0x1000), rng.below(0x1000), rng.next() & 0xffffffffffffull);
    s.collected_at = fmt::format("2026-05-04T{:02}:{:02}:{:02}Z", 10 + i / 3600 % 12, i / 60 % 60, i % 60);
    s.root = "/";

    // Node 0 is the captured node itself; the others get their own cards.
    std::map<std::string, std::string> uuid_of = {{testdata::kGpu0Pci, testdata::kGpu0Uuid},
                                                  {testdata::kGpu1Pci, testdata::kGpu1Uuid}};
    if (i != 0)
        for (auto& [pci, uuid] : uuid_of) uuid = uuid_from(rng);

    auto gone = [&](const std::string& pci) { return std::find(d.missing.begin(), d.missing.end(), pci) != d.missing.end(); };
    std::erase_if(s.pcie.devices, [&](const PciDevice& p) { return gone(p.address); });
    std::erase_if(s.pcie.gpus, [&](const std::string& p) { return gone(p); });
    std::erase_if(s.module.nvidia_gpus, [&](const NvidiaProcGpu& g) { return gone(g.address); });
    std::erase_if(s.nvml.devices, [&](const NvmlDevice& g) { return gone(g.pci); });
    std::erase_if(s.cuda.caller.devices, [&](const CudaDevice& g) { return gone(g.pci); });
    s.nvml.device_count = static_cast<unsigned>(s.nvml.devices.size());
    s.cuda.caller.device_count = static_cast<int>(s.cuda.caller.devices.size());

    for (auto& p : s.pcie.devices)
        if (std::find(d.link_degraded.begin(), d.link_degraded.end(), p.address) != d.link_degraded.end())
            p.link_current = {16.0, 8, "16.0 GT/s PCIe"};
    for (auto& g : s.module.nvidia_gpus) {
        g.uuid = uuid_of[g.address];
        g.fields["GPU UUID"] = g.uuid;
        if (auto it = d.vbios.find(g.address); it != d.vbios.end()) g.vbios = g.fields["Video BIOS"] = it->second;
        g.firmware = g.fields["GPU Firmware"] = d.driver;
    }
    for (auto& g : s.nvml.devices) g.uuid = uuid_of[g.pci];
    for (auto& g : s.cuda.caller.devices) g.uuid = uuid_of[g.pci];

    s.module.nvidia_driver_version = d.driver;
    s.module.nvidia_proc_version =
        fmt::format("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {}  Release Build  (nixbld@)", d.driver);
    for (auto& m : s.module.loaded) m.version = d.driver;
    s.nvml.driver_version = d.driver;
    s.nvml.nvml_version = fmt::format("{}.{}", *d.cuda / 1000, d.driver);
    s.nvml.cuda_driver_version = d.cuda;
    s.cuda.driver_version = d.cuda;
    for (auto& lib : s.libraries.libraries) {
        auto retag = [&](LibraryCopy& c) {
            c.version = d.driver;
            if (auto pos = c.real_path.find(testdata::kDriver); pos != std::string::npos)
                c.real_path.replace(pos, std::string(testdata::kDriver).size(), d.driver);
        };
        if (lib.chosen) retag(*lib.chosen);
        for (auto& c : lib.copies) retag(c);
    }

    double t = 120.0;
    for (auto& [pci, code] : d.xids) {
        t += 37.5 + static_cast<double>(rng.below(5000)) / 10.0;
        int pid = 1000 + static_cast<int>(rng.below(60000));
        std::string bus = pci.substr(0, pci.size() - 2);  // the driver writes PCI:dddd:bb:dd
        XidEvent x;
        x.pci = pci;
        x.code = code;
        x.pid = pid;
        x.process = "python3";
        x.text = fmt::format("NVRM: Xid (PCI:{}): {}, pid={}, name=python3, {}", bus, code, pid, xid_text(code));
        x.monotonic_s = t;
        s.kernel_log.lines.push_back({t, "", x.text, LogTopic::xid});
        s.kernel_log.xids.push_back(std::move(x));
    }
    s.kernel_log.lines_read += s.kernel_log.xids.size();
    return s;
}

int usage(const char* msg) {
    std::fprintf(stderr,
                 "gpudx_gen_fleet: %s\nusage: gpudx_gen_fleet --out DIR [--seed N] [--count N] [--bad N] [--compact]\n",
                 msg);
    return 64;
}

}  // namespace

int main(int argc, char** argv) {
    uint64_t seed = 1, count = 50, bad = 0;
    bool compact = false;
    std::string out;
    for (int a = 1; a < argc; ++a) {
        std::string arg = argv[a];
        auto value = [&]() -> std::string { return a + 1 < argc ? argv[++a] : std::string(); };
        if (arg == "--seed") seed = std::strtoull(value().c_str(), nullptr, 10);
        else if (arg == "--count") count = std::strtoull(value().c_str(), nullptr, 10);
        else if (arg == "--bad") bad = std::strtoull(value().c_str(), nullptr, 10);
        else if (arg == "--out") out = value();
        else if (arg == "--compact") compact = true;
        else return usage(("unknown argument " + arg).c_str());
    }
    if (out.empty()) return usage("--out DIR is required");
    if (count == 0 || count > 1000000) return usage("--count must be 1..1000000");
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::create_directories(fs::path(out) / "nodes", ec);
    if (ec) return usage(("cannot create " + out + ": " + ec.message()).c_str());

    const Snapshot base = testdata::h200x2_snapshot();
    json manifest;
    manifest["generator"] = "gpudx_gen_fleet";
    manifest["seed"] = seed;
    manifest["count"] = count;
    manifest["base"] = "tests/fixtures/h200x2 (tests/fleet/h200x2_snapshot.hpp)";
    manifest["matrix"] = "examples/matrix.toml";
    auto& nodes = manifest["nodes"] = json::array();

    struct Expect {
        size_t nodes = 0, conforming = 0, missing = 0;
        std::map<std::string, size_t> drivers, kernels, vbios, cuda;
    };
    std::map<std::string, Expect> by_class;
    std::map<std::string, size_t> xids_by_code, xid_nodes_by_code;

    for (uint64_t i = 0; i < count; ++i) {
        Drift d = drift_for(seed, i);
        Snapshot s = apply(base, d, seed, i);
        std::string file = (fs::path(out) / "nodes" / (d.hostname + ".json")).string();
        std::ofstream f(file, std::ios::binary | std::ios::trunc);
        f << snapshot_to_json(s).dump(compact ? -1 : 2) << "\n";
        if (!f) return usage(("cannot write " + file).c_str());

        std::string cls = d.classified ? "h200x2" : "(unclassified)";
        auto& e = by_class[cls];
        ++e.nodes;
        ++e.drivers[d.driver];
        ++e.kernels[d.kernel];
        ++e.cuda[fmt::format("{}.{}", *d.cuda / 1000, *d.cuda % 1000 / 10)];
        std::vector<std::string> vbios;
        for (auto& g : s.module.nvidia_gpus) {
            ++e.vbios[g.vbios];
            vbios.push_back(g.vbios);
        }
        bool diverges = d.driver != testdata::kDriver || d.kernel != testdata::kKernel || !d.missing.empty();
        for (auto& v : vbios) diverges |= v != testdata::kVbios;
        if (!d.missing.empty()) ++e.missing;
        // A link trained at x8 is a warning finding of the rules: the node is not conforming, whatever its
        // versions. (The generated Xids carry no kernel-log tallies, so the rules raise no finding for them.)
        bool unhealthy = !d.link_degraded.empty();
        if (d.classified && !diverges && !unhealthy) ++e.conforming;
        std::set<int> codes;
        json xj = json::array();
        for (auto& [pci, code] : d.xids) {
            ++xids_by_code[std::to_string(code)];
            codes.insert(code);
            xj.push_back({{"pci", pci}, {"code", code}});
        }
        for (int c : codes) ++xid_nodes_by_code[std::to_string(c)];
        nodes.push_back({{"file", fs::path(file).filename().string()},
                         {"hostname", d.hostname},
                         {"class", d.classified ? json(cls) : json(nullptr)},
                         {"driver", d.driver},
                         {"kernel", d.kernel},
                         {"vbios", vbios},
                         {"gpus", s.module.nvidia_gpus.size()},
                         {"missing", d.missing},
                         {"link_degraded", d.link_degraded},
                         {"diverges", d.classified && diverges},
                         {"unhealthy", unhealthy},
                         {"xids", xj}});
    }

    // Broken inputs a report must name and skip: a snapshot cut short, and JSON that is no snapshot.
    auto& bad_files = manifest["bad_files"] = json::array();
    std::string whole = snapshot_to_json(apply(base, drift_for(seed, 0), seed, 0)).dump(2);
    for (uint64_t k = 0; k < bad; ++k) {
        bool truncated = k % 2 == 0;
        std::string name = fmt::format("zz-bad-{:03}.json", k);
        std::ofstream f(fs::path(out) / "nodes" / name, std::ios::binary | std::ios::trunc);
        if (truncated)
            f << whole.substr(0, whole.size() / 2);
        else
            f << R"({"kind": "prometheus-targets", "targets": ["gpu-a001:9400"]})" << "\n";
        bad_files.push_back({{"file", name}, {"kind", truncated ? "truncated" : "foreign"}});
    }

    json expected;
    for (auto& [cls, e] : by_class)
        expected["classes"][cls] = {{"nodes", e.nodes},     {"conforming", e.conforming},
                                    {"missing_gpu_nodes", e.missing}, {"drivers", e.drivers},
                                    {"kernels", e.kernels}, {"vbios", e.vbios},
                                    {"cuda", e.cuda}};
    expected["xids_by_code"] = xids_by_code;
    expected["xid_nodes_by_code"] = xid_nodes_by_code;
    expected["nodes"] = count;
    expected["skipped"] = bad;
    manifest["expected"] = expected;
    std::ofstream mf(fs::path(out) / "manifest.json", std::ios::binary | std::ios::trunc);
    mf << manifest.dump(2) << "\n";
    if (!mf) return usage("cannot write manifest.json");
    std::fprintf(stderr, "gpudx_gen_fleet: %llu snapshots (+%llu bad) in %s/nodes, manifest %s/manifest.json\n",
                 static_cast<unsigned long long>(count), static_cast<unsigned long long>(bad), out.c_str(), out.c_str());
    return 0;
}
