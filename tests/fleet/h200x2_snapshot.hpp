#pragma once
// The 2xH200 node of tests/fixtures/h200x2 as a filled Snapshot, with the values its capture shows
// (proc/driver/nvidia/gpus/*/information, sys/bus/pci/devices, dev/, _commands/nvidia-smi-q.xml, ldconfig-p.txt,
// dmesg.txt, uname.txt). Built in code so the baseline, matrix and fleet tests and the fleet generator do
// not depend on the collectors' progress; the collectors are tested against the capture itself.
#include <string>

#include "model/snapshot.hpp"

namespace gpudx::testdata {

inline constexpr const char* kGpu0Uuid = "GPU-992cb470-9027-88f4-48a9-a9a329d6978d";
inline constexpr const char* kGpu1Uuid = "GPU-40cd403d-66ba-4608-72b9-5be5031085dc";
inline constexpr const char* kGpu0Pci = "0000:00:06.0";
inline constexpr const char* kGpu1Pci = "0000:00:07.0";
inline constexpr const char* kDriver = "580.159.04";
inline constexpr const char* kVbios = "96.00.a5.00.1a";
inline constexpr const char* kKernel = "6.18.44-fc-v657-gpu";
inline constexpr const char* kModel = "NVIDIA H200";

inline PciDevice h200x2_pci(std::string address, uint32_t cls, uint32_t vendor, uint32_t device) {
    PciDevice d;
    d.address = std::move(address);
    d.class_code = cls;
    d.vendor_id = vendor;
    d.device_id = device;
    d.revision = 0;
    d.parent = "";
    return d;
}

inline Snapshot h200x2_snapshot() {
    Snapshot s;
    s.gpudx_version = "0.1.0";
    s.collected_at = "2026-05-04T10:00:00Z";
    s.root = "tests/fixtures/h200x2";
    s.host.hostname = "vm";
    s.host.kernel_release = kKernel;
    s.host.kernel_version = "#1 SMP PREEMPT_DYNAMIC @0";
    s.host.cmdline = "console=ttyS0 quiet reboot=k panic=1 random.trust_cpu=1 swiotlb=noforce psi=1";

    // sys/devices/pci0000:00: a host bridge, virtio devices and the two GPUs.
    s.pcie.devices.push_back(h200x2_pci("0000:00:00.0", 0x060000, 0x8086, 0x0d57));
    s.pcie.devices.push_back(h200x2_pci("0000:00:01.0", 0x018000, 0x1af4, 0x1042));
    s.pcie.devices.push_back(h200x2_pci("0000:00:02.0", 0x018000, 0x1af4, 0x1042));
    s.pcie.devices.push_back(h200x2_pci("0000:00:03.0", 0x020000, 0x1af4, 0x1041));
    s.pcie.devices.push_back(h200x2_pci("0000:00:04.0", 0xffff00, 0x1af4, 0x1053));
    s.pcie.devices.push_back(h200x2_pci("0000:00:05.0", 0xffff00, 0x1af4, 0x1044));
    for (const char* addr : {kGpu0Pci, kGpu1Pci}) {
        auto d = h200x2_pci(addr, 0x030200, 0x10de, 0x2335);
        d.subsystem_vendor_id = 0x10de;
        d.subsystem_device_id = 0x18bf;
        d.device_name = "GH100 [H200 NVL]";
        d.driver = "nvidia";
        d.numa_node = -1;
        d.link_current = {32.0, 16, "32.0 GT/s PCIe"};
        d.link_max = {32.0, 16, "32.0 GT/s PCIe"};
        d.aer_correctable = {{"RxErr", 0}, {"BadTLP", 0}, {"BadDLLP", 0}, {"Rollover", 0}, {"Timeout", 0},
                             {"NonFatalErr", 0}, {"CorrIntErr", 0}, {"HeaderOF", 0}, {"TOTAL_ERR_COR", 0}};
        d.aer_nonfatal = {{"Undefined", 0}, {"DLP", 0}, {"SDES", 0}, {"TLP", 0}, {"FCP", 0}, {"CmpltTO", 0},
                          {"CmpltAbrt", 0}, {"UnxCmplt", 0}, {"RxOF", 0}, {"MalfTLP", 0}, {"TOTAL_ERR_NONFATAL", 0}};
        d.aer_fatal = d.aer_nonfatal;
        d.is_gpu = true;
        s.pcie.devices.push_back(std::move(d));
        s.pcie.gpus.push_back(addr);
    }

    s.module.kernel_release = kKernel;
    s.module.loaded = {{"nvidia_uvm", 1830912, "Live", "(O)", kDriver}, {"nvidia", 14299136, "Live", "(O)", kDriver}};
    s.module.nvidia_proc_version =
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)";
    s.module.nvidia_driver_version = kDriver;
    s.module.nvidia_gpus_listed = true;  // /proc/driver/nvidia/gpus was read
    // The capture holds no /lib/modules tree: the module files were not examined, as a real snapshot says.
    s.module.module_dir = std::string("/lib/modules/") + kKernel;
    s.module.files_unavailable = std::string("no /lib/modules/") + kKernel + " in this root: module files not examined";
    unsigned minor = 0;
    for (auto [addr, uuid] : {std::pair{kGpu0Pci, kGpu0Uuid}, std::pair{kGpu1Pci, kGpu1Uuid}}) {
        NvidiaProcGpu g;
        g.address = addr;
        g.model = kModel;
        g.uuid = uuid;
        g.vbios = kVbios;
        g.bus_type = "PCIe";
        g.minor = minor++;
        g.firmware = kDriver;
        g.excluded = false;
        g.fields = {{"Model", kModel},         {"IRQ", "41"},           {"GPU UUID", uuid},
                    {"Video BIOS", kVbios},    {"Bus Type", "PCIe"},    {"DMA Size", "52 bits"},
                    {"DMA Mask", "0xfffffffffffff"}, {"Bus Location", addr}, {"Device Minor", std::to_string(*g.minor)},
                    {"GPU Firmware", kDriver}, {"GPU Excluded", "No"}};
        s.module.nvidia_gpus.push_back(std::move(g));
    }

    s.kernel_log.source = "_commands/dmesg.txt";
    s.kernel_log.format = KernelLogFormat::dmesg;
    s.kernel_log.lines_read = 1180;
    s.kernel_log.lines = {
        {0.481389, "", "nvidia: loading out-of-tree module taints kernel.", LogTopic::nvrm},
        {0.550020, "", "nvidia-nvlink: Nvlink Core is being initialized, major device number 240", LogTopic::nvrm},
        {0.550032, "", "NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)",
         LogTopic::nvrm},
        {1.193650, "", "NVRM: gpuClearFbhubPoisonIntrForBug2924523_GA100: FBHUB Interrupt detected. Clearing it.",
         LogTopic::nvrm},
        {1.235791, "", "NVRM: gpuClearFbhubPoisonIntrForBug2924523_GA100: FBHUB Interrupt detected. Clearing it.",
         LogTopic::nvrm},
        {3.920933, "",
         "NVRM: Persistence mode is deprecated and will be removed in a future release. Please use "
         "nvidia-persistenced instead.",
         LogTopic::nvrm}};

    // dev/: the nodes the capture holds (mode 0666, the caps directory 0755), as `gpudx snapshot --root` reads them.
    for (const char* path : {"/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl"}) {
        DeviceNode n;
        n.path = path;
        n.type = "char";
        n.mode = 0666;
        s.devices.nodes.push_back(std::move(n));
    }
    DeviceNode caps;
    caps.path = "/dev/nvidia-caps";
    caps.type = "directory";
    caps.mode = 0755;
    s.devices.nodes.push_back(std::move(caps));

    s.libraries.ld_so_cache_format = "ldconfig -p";
    for (const char* soname : {"libcuda.so.1", "libnvidia-ml.so.1"}) {
        ResolvedLibrary lib;
        lib.soname = soname;
        LibraryCopy first{std::string("/usr/local/nvidia/lib64/") + soname,
                          std::string("/usr/local/nvidia/lib64/") + (std::string(soname).substr(0, std::string(soname).size() - 2)) + "." + kDriver,
                          kDriver, "ld.so.cache"};
        LibraryCopy second{std::string("/lib/") + soname, std::string("/lib/") + soname, kDriver, "ld.so.cache"};
        lib.chosen = first;
        lib.reason = "first in /etc/ld.so.cache";
        lib.copies = {first, second};
        s.libraries.libraries.push_back(std::move(lib));
    }

    s.nvml.library_path = "/usr/local/nvidia/lib64/libnvidia-ml.so.1";
    s.nvml.init_result = 0;
    s.nvml.driver_version = kDriver;
    s.nvml.nvml_version = "13.580.159.04";
    s.nvml.cuda_driver_version = 13000;
    s.nvml.device_count = 2;
    unsigned index = 0;
    for (auto [addr, uuid] : {std::pair{kGpu0Pci, kGpu0Uuid}, std::pair{kGpu1Pci, kGpu1Uuid}}) {
        NvmlDevice d;
        d.index = index;
        d.uuid = uuid;
        d.name = kModel;
        d.bus_id = std::string("00000000:00:0") + (index == 0 ? "6" : "7") + ".0";
        d.pci = addr;
        d.domain = 0;
        d.bus = 0;
        d.device = index == 0 ? 6 : 7;
        d.minor = index;
        d.persistence_mode = true;
        d.mig_mode = false;
        d.ecc_enabled = true;
        d.ecc_uncorrected_volatile = 0;
        d.ecc_uncorrected_aggregate = 0;
        d.remapped_rows_correctable = 0;
        d.remapped_rows_uncorrectable = 0;
        d.remapped_rows_pending = false;
        d.remapped_rows_failure = false;
        for (unsigned l = 0; l < 18; ++l) d.nvlinks.push_back({l, true});
        s.nvml.devices.push_back(std::move(d));
        ++index;
    }

    s.cuda.library_path = "/usr/local/nvidia/lib64/libcuda.so.1";
    s.cuda.driver_version = 13000;
    s.cuda.caller.cuda_visible_devices = std::nullopt;
    s.cuda.caller.init_result = 0;
    s.cuda.caller.device_count = 2;
    for (int o = 0; o < 2; ++o) {
        CudaDevice d;
        d.ordinal = o;
        d.uuid = o == 0 ? kGpu0Uuid : kGpu1Uuid;
        d.bus_id = o == 0 ? "0000:00:06.0" : "0000:00:07.0";
        d.pci = o == 0 ? kGpu0Pci : kGpu1Pci;
        d.attr_bus = 0;
        d.attr_device = o == 0 ? 6 : 7;
        d.attr_domain = 0;
        d.name = kModel;
        d.cc_major = 9;
        d.cc_minor = 0;
        d.total_memory = 150754820096ull;
        s.cuda.caller.devices.push_back(std::move(d));
    }

    for (const char* name : {"host", "pcie", "module", "kernel_log", "libraries", "devices", "environment", "nvml", "cuda"}) {
        CollectorStatus c;
        c.name = name;
        c.state = CollectorState::ok;
        c.duration_ms = 1.0;
        s.collectors.push_back(std::move(c));
    }
    return s;
}

}  // namespace gpudx::testdata
