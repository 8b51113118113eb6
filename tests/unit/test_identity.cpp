// The identity join and identity.* rules over hand-built snapshots of the h200x2 node.
#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "rules/engine/check_context.hpp"
#include "identity/join.hpp"

using namespace gpudx;

namespace gpudx {
void check_identity(const CheckContext&, std::vector<Finding>&);
}

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

namespace {

const char* kUuid0 = "GPU-992cb470-9027-88f4-48a9-a9a329d6978d";
const char* kUuid1 = "GPU-40cd403d-66ba-4608-72b9-5be5031085dc";

Snapshot node() {
    Snapshot s;
    for (auto [addr, uuid, minor] : {std::tuple{"0000:00:06.0", kUuid0, 0u}, std::tuple{"0000:00:07.0", kUuid1, 1u}}) {
        PciDevice d;
        d.address = addr;
        d.vendor_id = 0x10de;
        d.is_gpu = true;
        d.numa_node = 0;
        d.slot = minor == 0 ? "6" : "7";
        s.pcie.devices.push_back(d);
        NvidiaProcGpu g;
        g.address = addr;
        g.uuid = uuid;
        g.minor = minor;
        g.model = "NVIDIA H200";
        s.module.nvidia_gpus.push_back(g);
        NvmlDevice n;
        n.index = minor;
        n.uuid = uuid;
        n.bus_id = std::string("0000") + addr;
        n.pci = addr;
        n.minor = minor;
        s.nvml.devices.push_back(n);
        CudaDevice c;
        c.ordinal = static_cast<int>(minor);
        c.uuid = uuid;
        c.bus_id = addr;
        c.pci = addr;
        c.attr_domain = 0;
        c.attr_bus = 0;
        c.attr_device = minor == 0 ? 6 : 7;
        s.cuda.caller.devices.push_back(c);
        DeviceNode node;
        node.path = "/dev/nvidia" + std::to_string(minor);
        node.type = "char";
        node.major = 195u;
        node.minor = minor;
        s.devices.nodes.push_back(node);
    }
    s.nvml.device_count = 2;
    s.cuda.caller.device_count = 2;
    s.cuda.caller.init_result = 0;
    s.cuda.caller.cuda_visible_devices = std::nullopt;
    s.cuda.caller.cuda_device_order = std::nullopt;
    return s;
}

std::vector<Finding> run(const Snapshot& s) {
    DiagnoseOptions o;
    CheckContext ctx{s, o};
    std::vector<Finding> out;
    check_identity(ctx, out);
    return out;
}

}  // namespace

TEST(IdentityJoin, OneRowPerGpuJoiningEverySource) {
    auto t = join_identity(node());
    ASSERT_EQ(t.rows.size(), 2u);
    auto& r = t.rows[0];
    EXPECT_EQ(r.pci, "0000:00:06.0");
    EXPECT_EQ(r.uuid(), kUuid0);
    EXPECT_EQ(r.minor, 0u);
    EXPECT_EQ(r.dev_node, "/dev/nvidia0");
    EXPECT_EQ(r.nvml_index, 0u);
    EXPECT_EQ(r.nvml_bus_id, "00000000:00:06.0");
    EXPECT_EQ(r.cuda_ordinal, 0);
    EXPECT_EQ(r.numa_node, 0);
    EXPECT_EQ(r.model, "NVIDIA H200");
    EXPECT_EQ(t.rows[1].cuda_uuid, kUuid1);
    EXPECT_TRUE(run(node()).empty());
}

TEST(IdentityJoin, CudaOrdinalFollowsVisibleDevicesNotIndex) {
    auto s = node();
    // CUDA_VISIBLE_DEVICES=1: ordinal 0 is the GPU at 0000:00:07.0.
    s.cuda.caller.cuda_visible_devices = "1";
    s.cuda.caller.devices.erase(s.cuda.caller.devices.begin());
    s.cuda.caller.devices[0].ordinal = 0;
    auto t = join_identity(s);
    EXPECT_FALSE(t.rows[0].cuda_ordinal);
    EXPECT_EQ(t.rows[1].cuda_ordinal, 0);
    EXPECT_TRUE(run(s).empty());
}

TEST(IdentityChecks, StaleBusIdAfterRestoreIsNamedWithBothGpus) {
    auto s = node();
    std::swap(s.cuda.caller.devices[0].uuid, s.cuda.caller.devices[1].uuid);
    auto fs = run(s);
    ASSERT_EQ(std::count_if(fs.begin(), fs.end(), [](auto& f) { return f.id == "identity.cuda_stale_bus_id"; }), 2);
    auto& f = fs[0];
    EXPECT_EQ(f.severity, Severity::error);
    EXPECT_EQ(f.message,
              std::string("CUDA ordinal 0 reports bus 0000:00:06.0 but the UUID of 0000:00:07.0 (") + kUuid1 +
                  "): the bus id is stale");
    ASSERT_EQ(f.subjects.size(), 2u);
    EXPECT_EQ(f.subjects[0].uuid, kUuid0);
    EXPECT_EQ(f.subjects[1].pci, "0000:00:07.0");
    EXPECT_EQ(f.evidence[0].source, "cuDeviceGetPCIBusId(0)");
    EXPECT_EQ(f.evidence[2].source, "/proc/driver/nvidia/gpus/0000:00:06.0/information");
}

TEST(IdentityChecks, UuidFromAnotherNode) {
    auto s = node();
    s.cuda.caller.devices[0].uuid = "GPU-8480b21b-5e18-6aeb-d0bb-b9c8434b36d6";
    auto fs = run(s);
    ASSERT_EQ(fs.size(), 1u);
    EXPECT_NE(fs[0].message.find("which no GPU on this node has"), std::string::npos);
}

TEST(IdentityChecks, PciAttributesDisagreeingWithBusString) {
    auto s = node();
    s.cuda.caller.devices[1].attr_device = 6;
    auto fs = run(s);
    ASSERT_EQ(fs.size(), 1u);
    EXPECT_EQ(fs[0].id, "identity.cuda_pci_attribute_mismatch");
}

TEST(IdentityChecks, NvmlAndProcfsUuidDisagree) {
    auto s = node();
    s.nvml.devices[1].uuid = "GPU-00000000-0000-0000-0000-000000000001";
    auto fs = run(s);
    auto it = std::find_if(fs.begin(), fs.end(), [](auto& f) { return f.id == "identity.nvml_uuid_mismatch"; });
    ASSERT_NE(it, fs.end());
    EXPECT_EQ(it->evidence[0].source, "/proc/driver/nvidia/gpus/0000:00:07.0/information");
    EXPECT_EQ(it->evidence[1].source, "nvmlDeviceGetUUID(1)");
}

TEST(IdentityChecks, VisibleDevicesEntriesAreLeftToTheAllocationFamily) {
    // An entry that names no GPU here is allocation.uuid_not_on_node / allocation.visible_devices_invalid
    // (test_environment.cpp): the identity family no longer reports it a second time.
    auto s = node();
    for (auto cvd : {"GPU-40cd403d,GPU-deadbeef-0000", "0,2", "MIG-0b8e2c47-3d19-5a6f-b1e4-7c2d90f31a58"}) {
        s.cuda.caller.cuda_visible_devices = cvd;
        EXPECT_TRUE(run(s).empty()) << cvd;
    }
}

TEST(IdentityChecks, DuplicateUuidIgnoresRowsOnlyCudaNames) {
    // A process restored from another node: CUDA answers this node's UUIDs at the source node's bus ids.
    auto s = node();
    s.cuda.caller.devices[0].bus_id = s.cuda.caller.devices[0].pci = "0000:1b:00.0";
    s.cuda.caller.devices[1].bus_id = s.cuda.caller.devices[1].pci = "0000:43:00.0";
    auto fs = run(s);
    EXPECT_EQ(std::count_if(fs.begin(), fs.end(), [](auto& f) { return f.id == "identity.duplicate_uuid"; }), 0);
    EXPECT_EQ(std::count_if(fs.begin(), fs.end(), [](auto& f) { return f.id == "identity.cuda_bus_unknown"; }), 2);

    // NVML placing a GPU at a second address is a duplicate, and its source is named by the call.
    auto t = node();
    t.nvml.devices[0].bus_id = "00000000:00:08.0";
    t.nvml.devices[0].pci = "0000:00:08.0";
    auto ts = run(t);
    auto it = std::find_if(ts.begin(), ts.end(), [](auto& f) { return f.id == "identity.duplicate_uuid"; });
    ASSERT_NE(it, ts.end());
    ASSERT_EQ(it->evidence.size(), 2u);
    EXPECT_EQ(it->evidence[0].source, "/proc/driver/nvidia/gpus/0000:00:06.0/information");
    EXPECT_EQ(it->evidence[1].source, "nvmlDeviceGetUUID(0)");
    EXPECT_EQ(it->evidence[1].value, std::string(kUuid0) + " at 0000:00:08.0");
}

TEST(IdentityChecks, StaleBusIdWhereNvmlAgreesWithCudaIsNotCalledARestore) {
    // procfs has GPU-992cb470 at 0000:00:06.0; NVML and CUDA both answer another node's UUID there: the
    // libraries talk to another driver, no process was restored.
    auto s = node();
    const char* other = "GPU-8480b21b-5e18-6aeb-d0bb-b9c8434b36d6";
    s.nvml.devices[0].uuid = other;
    s.cuda.caller.devices[0].uuid = other;
    auto fs = run(s);
    auto it = std::find_if(fs.begin(), fs.end(), [](auto& f) { return f.id == "identity.cuda_stale_bus_id"; });
    ASSERT_NE(it, fs.end());
    EXPECT_EQ(it->next_step.find("cuda-checkpoint"), std::string::npos) << it->next_step;
    EXPECT_NE(it->next_step.find("NVML agrees with CUDA"), std::string::npos) << it->next_step;
    EXPECT_NE(it->message.find("as NVML does, but the kernel driver has " + std::string(kUuid0)), std::string::npos)
        << it->message;
    // Where NVML agrees with procfs, the restore signature stands.
    auto r = node();
    r.cuda.caller.devices[0].uuid = other;
    auto rs = run(r);
    auto st = std::find_if(rs.begin(), rs.end(), [](auto& f) { return f.id == "identity.cuda_stale_bus_id"; });
    ASSERT_NE(st, rs.end());
    EXPECT_NE(st->next_step.find("cuda-checkpoint"), std::string::npos);
}

TEST(IdentityRender, CsvAndJsonCarryEverySource) {
    auto t = join_identity(node());
    auto csv = render_identity_csv(t);
    EXPECT_EQ(csv.substr(0, csv.find('\n')),
              "pci,slot,numa_node,minor,dev_node,uuid,procfs_uuid,nvml_index,nvml_uuid,nvml_bus_id,cuda_ordinal,"
              "cuda_uuid,cuda_bus_id,mig_uuids,model,vendor,render_minor,amd_uuid,kfd_node,kfd_gpu_id,rocr_index,"
              "hip_index");
    EXPECT_NE(csv.find("0000:00:07.0,7,0,1,/dev/nvidia1,GPU-40cd403d-66ba-4608-72b9-5be5031085dc,"), std::string::npos)
        << csv;
    auto j = identity_to_json(t);
    EXPECT_EQ(j["gpus"][1]["nvml"]["bus_id"], "00000000:00:07.0");
    EXPECT_EQ(j["gpus"][0]["cuda"]["ordinal"], 0);
    auto text = render_identity_text(t);
    EXPECT_NE(text.find("0000:00:06.0"), std::string::npos);
    EXPECT_NE(text.find("CUDA_VISIBLE_DEVICES=<unset>"), std::string::npos);
}

}  // namespace GPUDX_UNITY_ID
