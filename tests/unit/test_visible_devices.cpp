#include <gtest/gtest.h>

#include "identity/visible_devices.hpp"
#include "model/snapshot.hpp"

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

using namespace gpudx;

namespace {
const std::vector<NodeGpu> kH200 = {
    {"GPU-992cb470-9027-88f4-48a9-a9a329d6978d", "0000:00:06.0", 0, 0u, {}},
    {"GPU-40cd403d-66ba-4608-72b9-5be5031085dc", "0000:00:07.0", 1, 1u, {"MIG-aaaaaaaa-1111-2222-3333-444444444444"}},
};
}  // namespace

TEST(VisibleDevices, SpecialValues) {
    EXPECT_EQ(parse_visible_devices(std::nullopt).kind, VisibleDevicesKind::unset);
    EXPECT_EQ(parse_visible_devices("").kind, VisibleDevicesKind::empty);
    EXPECT_EQ(parse_visible_devices("  ").kind, VisibleDevicesKind::empty);
    EXPECT_EQ(parse_visible_devices("all").kind, VisibleDevicesKind::all);
    EXPECT_EQ(parse_visible_devices("ALL").kind, VisibleDevicesKind::all);
    EXPECT_EQ(parse_visible_devices("none").kind, VisibleDevicesKind::none);
    EXPECT_EQ(parse_visible_devices("void").kind, VisibleDevicesKind::void_);
    EXPECT_STREQ(to_string(VisibleDevicesKind::void_), "void");
}

TEST(VisibleDevices, ClassifiesIndicesUuidsAndMig) {
    auto v = parse_visible_devices("1, GPU-992cb470,MIG-aaaaaaaa-1111-2222-3333-444444444444,"
                                   "MIG-GPU-40cd403d-66ba-4608-72b9-5be5031085dc/1/0");
    ASSERT_EQ(v.kind, VisibleDevicesKind::list);
    ASSERT_EQ(v.entries.size(), 4u);
    EXPECT_EQ(v.entries[0].type, VisibleEntryType::index);
    EXPECT_EQ(v.entries[0].index, 1u);
    EXPECT_EQ(v.entries[1].type, VisibleEntryType::gpu_uuid);
    EXPECT_EQ(v.entries[1].text, "GPU-992cb470");
    EXPECT_EQ(v.entries[2].type, VisibleEntryType::mig_uuid);
    EXPECT_EQ(v.entries[3].type, VisibleEntryType::mig_uuid);
    EXPECT_FALSE(v.first_invalid);
    EXPECT_TRUE(v.has_indices());
    EXPECT_TRUE(v.has_uuids());
}

TEST(VisibleDevices, CudaStopsAtTheFirstInvalidEntry) {
    auto v = parse_visible_devices("0,-1,1");
    ASSERT_TRUE(v.first_invalid);
    EXPECT_EQ(*v.first_invalid, 1u);
    EXPECT_EQ(v.entries.size(), 3u);
    ASSERT_EQ(v.effective().size(), 1u);
    EXPECT_EQ(v.effective()[0].text, "0");
    EXPECT_EQ(parse_visible_devices("0,,1").first_invalid, 1u);
    EXPECT_EQ(parse_visible_devices("GPU-zz").first_invalid, 0u);
    EXPECT_EQ(parse_visible_devices("nvidia0").first_invalid, 0u);
}

TEST(VisibleDevices, MatchesIndicesInPciOrderAndUuidPrefixes) {
    auto m = match_visible_devices(parse_visible_devices("1,gpu-992CB470,GPU-deadbeef,7"), kH200);
    ASSERT_EQ(m.size(), 4u);
    EXPECT_EQ(m[0].gpus, (std::vector<size_t>{1}));
    EXPECT_EQ(m[1].gpus, (std::vector<size_t>{0}));  // case-insensitive prefix
    EXPECT_TRUE(m[2].gpus.empty());                   // not on this node
    EXPECT_TRUE(m[3].gpus.empty());                   // no index 7
    std::vector<NodeGpu> twins = {{"GPU-abc10000-0000-0000-0000-000000000000", "0000:01:00.0", 0, 0u, {}},
                                  {"GPU-abc20000-0000-0000-0000-000000000000", "0000:02:00.0", 1, 1u, {}}};
    auto a = match_visible_devices(parse_visible_devices("GPU-abc"), twins);
    EXPECT_EQ(a[0].gpus, (std::vector<size_t>{0, 1}));  // ambiguous prefix
    auto full = match_visible_devices(parse_visible_devices("GPU-abc20000-0000-0000-0000-000000000000"), twins);
    EXPECT_EQ(full[0].gpus, (std::vector<size_t>{1}));
}

TEST(VisibleDevices, MatchesMigInstancesAndSlurmMinors) {
    auto m = match_visible_devices(
        parse_visible_devices("MIG-aaaaaaaa-1111-2222-3333-444444444444,MIG-GPU-992cb470-9027-88f4-48a9-a9a329d6978d/2/0"),
        kH200);
    ASSERT_EQ(m.size(), 2u);
    EXPECT_EQ(m[0].gpus, (std::vector<size_t>{1}));
    EXPECT_TRUE(m[0].mig);
    EXPECT_EQ(m[1].gpus, (std::vector<size_t>{0}));
    // Slurm's indices follow /dev/nvidiaN: give the second GPU minor 0 and the first minor 1.
    auto swapped = kH200;
    swapped[0].minor = 1;
    swapped[1].minor = 0;
    auto s = match_visible_devices(parse_visible_devices("0"), swapped, IndexMeaning::device_minor);
    EXPECT_EQ(s[0].gpus, (std::vector<size_t>{1}));
    auto p = match_visible_devices(parse_visible_devices("0"), swapped, IndexMeaning::pci_order);
    EXPECT_EQ(p[0].gpus, (std::vector<size_t>{0}));
}

TEST(VisibleDevices, NodeGpusComeInPciOrderFromProcfs) {
    Snapshot s;
    NvidiaProcGpu b;
    b.address = "0000:00:07.0";
    b.uuid = "GPU-40cd403d-66ba-4608-72b9-5be5031085dc";
    b.minor = 1;
    NvidiaProcGpu a;
    a.address = "0000:00:06.0";
    a.uuid = "GPU-992cb470-9027-88f4-48a9-a9a329d6978d";
    a.minor = 0;
    s.module.nvidia_gpus = {b, a};
    auto g = node_gpus(s);
    ASSERT_EQ(g.size(), 2u);
    EXPECT_EQ(g[0].pci, "0000:00:06.0");
    EXPECT_EQ(g[0].index, 0u);
    EXPECT_EQ(g[1].uuid, "GPU-40cd403d-66ba-4608-72b9-5be5031085dc");
    EXPECT_EQ(g[1].index, 1u);
}

}  // namespace GPUDX_UNITY_ID
