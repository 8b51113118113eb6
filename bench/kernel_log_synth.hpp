#pragma once
// A synthetic kernel log for benchmarks: dmesg format, one boot, the mix of a busy GPU node's runtime
// log (networking, containers, storage, audit) with NVRM lines about 1 in 100, Xids about 1 in 500,
// AER about 1 in 1000 and IOMMU faults about 1 in 20000 lines.
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>

namespace gpudx::bench {

class KernelLogSynth {
public:
    explicit KernelLogSynth(uint32_t seed = 1) : rng_(seed) {}

    // Appends lines to `out` until it holds at least `bytes` bytes.
    void append(std::string& out, size_t bytes) {
        char line[512];
        while (out.size() < bytes) {
            t_ += 0.000001 * static_cast<double>(rng_() % 400000);
            int n = make_line(line, sizeof line);
            out.append(line, static_cast<size_t>(n));
        }
    }

private:
    int make_line(char* b, size_t cap) {
        uint32_t r = rng_() % 100000;
        unsigned gpu = rng_() % 8;
        unsigned bus = 0x18 + gpu * 0x10;
        unsigned pid = 1000 + rng_() % 60000;
        const char* proc = kProcs[rng_() % 6];
        if (r < 200) {  // Xid
            static const int codes[] = {13, 31, 43, 45, 63, 94, 79, 48, 119};
            int code = codes[rng_() % 9];
            return std::snprintf(b, cap, "[%12.6f] NVRM: Xid (PCI:0000:%02x:00): %d, pid=%u, name=%s, %s\n", t_, bus,
                                 code, pid, proc, code == 79 ? "GPU has fallen off the bus." : "Ch 00000010, errorString CTX SWITCH TIMEOUT");
        }
        if (r < 1000) {  // other NVRM
            return std::snprintf(b, cap, "[%12.6f] NVRM: GPU at PCI:0000:%02x:00: GPU-%08x-9027-88f4-48a9-a9a329d6978d\n",
                                 t_, bus, static_cast<unsigned>(rng_()));
        }
        if (r < 1100) {  // AER
            if (r & 1)
                return std::snprintf(b, cap, "[%12.6f] pcieport 0000:%02x:01.0: AER: Corrected error received: 0000:%02x:00.0\n",
                                     t_, bus - 1, bus);
            return std::snprintf(b, cap,
                                 "[%12.6f] nvidia 0000:%02x:00.0: PCIe Bus Error: severity=Corrected, type=Physical "
                                 "Layer, (Receiver ID)\n",
                                 t_, bus);
        }
        if (r < 1105) {
            return std::snprintf(b, cap,
                                 "[%12.6f] DMAR: [DMA Read NO_PASID] Request device [%02x:00.0] fault addr 0x%08x "
                                 "[fault reason 0x06] PTE Read access is not set\n",
                                 t_, bus, static_cast<unsigned>(rng_()));
        }
        switch (rng_() % 14) {
            case 0: return std::snprintf(b, cap, "[%12.6f] IPv6: ADDRCONF(NETDEV_CHANGE): veth%07x: link becomes ready\n", t_, static_cast<unsigned>(rng_() & 0xfffffff));
            case 1: return std::snprintf(b, cap, "[%12.6f] docker0: port %u(veth%07x) entered blocking state\n", t_, rng_() % 64, static_cast<unsigned>(rng_() & 0xfffffff));
            case 2: return std::snprintf(b, cap, "[%12.6f] EXT4-fs (nvme0n1p2): mounted filesystem %08x-3c2d-4e5f-a6b7-c8d9e0f1a2b3 r/w with ordered data mode. Quota mode: none.\n", t_, static_cast<unsigned>(rng_()));
            case 3: return std::snprintf(b, cap, "[%12.6f] audit: type=1400 audit(1764484088.%03u:%u): apparmor=\"DENIED\" operation=\"open\" class=\"file\" profile=\"cri-containerd.apparmor.d\" name=\"/proc/sys/kernel/random/boot_id\" pid=%u comm=\"%s\" requested_mask=\"r\" denied_mask=\"r\" fsuid=0 ouid=0\n", t_, rng_() % 1000, rng_() % 100000, pid, proc);
            case 4: return std::snprintf(b, cap, "[%12.6f] perf: interrupt took too long (%u > %u), lowering kernel.perf_event_max_sample_rate to %u\n", t_, 2500 + rng_() % 3000, 2500, 40000 + rng_() % 40000);
            case 5: return std::snprintf(b, cap, "[%12.6f] mlx5_core 0000:%02x:00.0: mlx5_fw_tracer_handle_traces:740:(pid %u): FW tracer buffer offset 0x%x config changed, device firmware interface ready\n", t_, 0x5e + gpu, pid, static_cast<unsigned>(rng_() & 0xffff));
            case 6: return std::snprintf(b, cap, "[%12.6f] Memory cgroup out of memory: Killed process %u (%s) total-vm:%ukB, anon-rss:%ukB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:%ukB oom_score_adj:0\n", t_, pid, proc, rng_() % 90000000, rng_() % 50000000, rng_() % 100000);
            case 7: return std::snprintf(b, cap, "[%12.6f] nfs: server 10.%u.%u.%u not responding, still trying\n", t_, rng_() % 256, rng_() % 256, rng_() % 256);
            case 8: return std::snprintf(b, cap, "[%12.6f] cgroup: fork rejected by pids controller in /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%08x.slice\n", t_, static_cast<unsigned>(rng_()));
            case 9: return std::snprintf(b, cap, "[%12.6f] bond0: (slave ens%uf0): link status definitely up, 200000 Mbps full duplex\n", t_, rng_() % 8);
            case 10: return std::snprintf(b, cap, "[%12.6f] TCP: request_sock_TCP: Possible SYN flooding on port %u. Sending cookies.  Check SNMP counters.\n", t_, 1024 + rng_() % 60000);
            case 11: return std::snprintf(b, cap, "[%12.6f] infiniband mlx5_%u: mlx5_ib_event:%u:(pid %u): warning: event on port 1, error code %u, module %s state changed\n", t_, gpu, rng_() % 3000, pid, rng_() % 16, proc);
            case 12: return std::snprintf(b, cap, "[%12.6f] overlayfs: upper fs does not support RENAME_WHITEOUT, falling back to xattr-based whiteouts (diff %08x)\n", t_, static_cast<unsigned>(rng_()));
            default: return std::snprintf(b, cap, "[%12.6f] %s[%u]: segfault at %x ip 00007f%08x sp 00007ffc%08x error 4 in libc.so.6[7f%05x+195000] likely on CPU %u (core %u, socket 0)\n", t_, proc, pid, static_cast<unsigned>(rng_()), static_cast<unsigned>(rng_()), static_cast<unsigned>(rng_()), static_cast<unsigned>(rng_() & 0xfffff), rng_() % 128, rng_() % 64);
        }
    }

    static constexpr const char* kProcs[] = {"python3", "pt_main_thread", "torchrun", "nccl-proxy", "dcgm-exporter", "containerd-shim"};
    std::mt19937 rng_;
    double t_ = 30.0;
};

// An Xid storm as NVIDIA/NVSentinel#1120 saw it (800,000 Xid 95 lines of 29 events): `lines` lines in `events`
// bursts, each burst one code (95 or 79, alternating) on one of 8 GPUs, its lines alike but for the time.
inline void append_xid_storm(std::string& out, size_t lines, int events = 29) {
    char line[256];
    size_t per_event = (lines + static_cast<size_t>(events) - 1) / static_cast<size_t>(events);
    double t = 100.0;
    for (size_t i = 0; i < lines; ++i) {
        size_t e = i / per_event;
        unsigned bus = 0x18 + static_cast<unsigned>(e % 8) * 0x10;
        bool fell = e % 2 == 1;
        t += (i % per_event == 0) ? 60.0 : 0.000010;
        int n = fell ? std::snprintf(line, sizeof line,
                                     "[%12.6f] NVRM: Xid (PCI:0000:%02x:00): 79, pid=%u, name=python3, GPU has fallen off the bus.\n",
                                     t, bus, 2000u + static_cast<unsigned>(e))
                     : std::snprintf(line, sizeof line,
                                     "[%12.6f] NVRM: Xid (PCI:0000:%02x:00): 95, pid=%u, name=python3, Uncontained: FBHUB. "
                                     "RST: Yes, D-RST: No\n",
                                     t, bus, 2000u + static_cast<unsigned>(e));
        out.append(line, static_cast<size_t>(n));
    }
}

// A quiet log of about `bytes` bytes: lines no kernel-log topic keeps, the reference the storm is timed against.
inline void append_quiet(std::string& out, size_t bytes) {
    char line[256];
    double t = 100.0;
    while (out.size() < bytes) {
        t += 0.000010;
        int n = std::snprintf(line, sizeof line,
                              "[%12.6f] EXT4-fs (nvme0n1p2): mounted filesystem with ordered data mode. Quota mode: none.\n", t);
        out.append(line, static_cast<size_t>(n));
    }
}

}  // namespace gpudx::bench
