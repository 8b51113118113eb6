#include <gtest/gtest.h>

#include "actions/device_map.hpp"

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

using namespace gpudx;

namespace {
const std::string kGpu0 = "GPU-992cb470-9027-88f4-48a9-a9a329d6978d";
const std::string kGpu1 = "GPU-40cd403d-66ba-4608-72b9-5be5031085dc";
constexpr uint64_t kGiB = 1ULL << 30;

// The h200x2 fixture's GPUs, 139.8 GiB free each.
std::vector<CheckpointGpu> h200x2() {
    return {{0, kGpu0, "0000:00:06.0", "NVIDIA H200", 150110011392ULL, 150755000320ULL},
            {1, kGpu1, "0000:00:07.0", "NVIDIA H200", 150110011392ULL, 150755000320ULL}};
}

std::vector<CheckpointGpu> four() {
    std::vector<CheckpointGpu> g;
    for (int i = 0; i < 4; ++i)
        g.push_back({i, "GPU-" + std::string(8, char('a' + i)) + "-0000-0000-0000-000000000000",
                     "0000:0" + std::to_string(i + 1) + ":00.0", "NVIDIA H100 80GB HBM3", 80 * kGiB, 81 * kGiB});
    return g;
}
}  // namespace

TEST(DeviceMap, ParsesPairsAndTheSwapShorthand) {
    auto items = parse_device_map(" swap:0,1 , 0000:00:08.0=GPU-abc ,3=2");
    ASSERT_TRUE(items) << items.error().message;
    std::vector<DeviceMapItem> want = {{"0", "1"}, {"1", "0"}, {"0000:00:08.0", "GPU-abc"}, {"3", "2"}};
    EXPECT_EQ(*items, want);
}

TEST(DeviceMap, RejectsMalformedMaps) {
    EXPECT_NE(parse_device_map("").error().message.find("empty"), std::string::npos);
    EXPECT_NE(parse_device_map("0=1,,1=0").error().message.find("empty item at position 2"), std::string::npos);
    EXPECT_NE(parse_device_map("0-1").error().message.find("is not OLD=NEW"), std::string::npos);
    EXPECT_NE(parse_device_map("0=1=2").error().message.find("is not OLD=NEW"), std::string::npos);
    EXPECT_NE(parse_device_map("=1").error().message.find("lacks a GPU"), std::string::npos);
    EXPECT_NE(parse_device_map("swap:0").error().message.find("swap needs two GPUs"), std::string::npos);
    EXPECT_NE(parse_device_map("swap:0,1=2").error().message.find("swap needs two GPUs"), std::string::npos);
    // A side that can name no GPU on any node is refused by the parse, before any driver is asked.
    EXPECT_NE(parse_device_map("0=gpu1").error().message.find("'gpu1' names no GPU"), std::string::npos);
    EXPECT_NE(parse_device_map("swap:first,1").error().message.find("'first' names no GPU"), std::string::npos);
    EXPECT_NE(parse_device_map("MIG-1234=0").error().message.find("MIG instance"), std::string::npos);
}

TEST(DeviceMap, ResolvesUuidPciAddressInAnySpellingAndIndex) {
    auto gpus = h200x2();
    EXPECT_EQ(resolve_gpu("GPU-40CD403D-66BA-4608-72B9-5BE5031085DC", gpus).value(), 1u);
    EXPECT_EQ(resolve_gpu("0000:00:07.0", gpus).value(), 1u);
    EXPECT_EQ(resolve_gpu("00000000:00:07.0", gpus).value(), 1u);  // NVML's spelling
    EXPECT_EQ(resolve_gpu("00:06.0", gpus).value(), 0u);
    EXPECT_EQ(resolve_gpu("1", gpus).value(), 1u);
    EXPECT_NE(resolve_gpu("2", gpus).error().message.find("GPU index 2 does not exist"), std::string::npos);
    EXPECT_NE(resolve_gpu("MIG-1234", gpus).error().message.find("MIG instance"), std::string::npos);
    EXPECT_NE(resolve_gpu("gpu0", gpus).error().message.find("names no GPU"), std::string::npos);
    // The error lists the node's GPUs by UUID and address.
    EXPECT_NE(resolve_gpu("0000:00:08.0", gpus).error().message.find("GPU 0 (" + kGpu0 + ", 0000:00:06.0)"),
              std::string::npos);
}

TEST(DeviceMap, SwapExpandsToBothPairs) {
    auto plan = plan_device_map("swap:0,1", h200x2());
    ASSERT_TRUE(plan) << plan.error().message;
    std::vector<GpuPair> want = {{kGpu0, kGpu1}, {kGpu1, kGpu0}};
    EXPECT_EQ(plan->pairs, want);
    EXPECT_TRUE(plan->remaps());
}

TEST(DeviceMap, UnmappedGpusMapToThemselves) {
    auto gpus = four();
    auto plan = plan_device_map("1=3,3=1", gpus);
    ASSERT_TRUE(plan) << plan.error().message;
    ASSERT_EQ(plan->pairs.size(), 4u);
    EXPECT_EQ(plan->pairs[0], (GpuPair{gpus[0].uuid, gpus[0].uuid}));
    EXPECT_EQ(plan->pairs[1], (GpuPair{gpus[1].uuid, gpus[3].uuid}));
    EXPECT_EQ(plan->pairs[2], (GpuPair{gpus[2].uuid, gpus[2].uuid}));
    EXPECT_EQ(plan->pairs[3], (GpuPair{gpus[3].uuid, gpus[1].uuid}));
}

TEST(DeviceMap, ARotationIsAPermutation) {
    auto plan = plan_device_map("0=1,1=2,2=3,3=0", four());
    ASSERT_TRUE(plan) << plan.error().message;
    EXPECT_EQ(plan->pairs[3].new_uuid, four()[0].uuid);
}

TEST(DeviceMap, IdentityMapDoesNotRemap) {
    auto plan = plan_device_map("0=0", h200x2());
    ASSERT_TRUE(plan);
    EXPECT_FALSE(plan->remaps());
}

TEST(DeviceMap, OneWayMoveIsNotAPermutation) {
    auto plan = plan_device_map("0=1", h200x2());
    ASSERT_FALSE(plan);
    EXPECT_NE(plan.error().message.find("not a permutation: GPU 1 (" + kGpu1 + ", 0000:00:07.0) would receive both"),
              std::string::npos)
        << plan.error().message;
    EXPECT_NE(plan.error().message.find("swap:0,1"), std::string::npos) << plan.error().message;
}

TEST(DeviceMap, GpuMappedTwiceIsAnError) {
    auto plan = plan_device_map("0=1,0=2,1=0", four());
    ASSERT_FALSE(plan);
    EXPECT_NE(plan.error().message.find("is mapped twice"), std::string::npos) << plan.error().message;
}

TEST(DeviceMap, DifferentChipsAreRefused) {
    auto gpus = h200x2();
    gpus[1].model = "NVIDIA A100-SXM4-80GB";
    auto plan = plan_device_map("swap:0,1", gpus);
    ASSERT_FALSE(plan);
    EXPECT_NE(plan.error().message.find("is a NVIDIA H200 but GPU 1"), std::string::npos) << plan.error().message;
}

TEST(DeviceMap, TargetMustHaveRoomForWhatArrives) {
    auto gpus = h200x2();
    gpus[1].free_memory = 10 * kGiB;
    // 16 GiB arrive on GPU1; 10 free there plus 4 the moved process releases on GPU1: too little.
    MemoryHeld held = std::map<std::string, uint64_t>{{kGpu0, 16 * kGiB}, {kGpu1, 4 * kGiB}};
    auto plan = plan_device_map("swap:0,1", gpus, held);
    ASSERT_FALSE(plan);
    EXPECT_NE(plan.error().message.find("GPU 1 (" + kGpu1 + ", 0000:00:07.0) has 14.00 GiB available (10.00 GiB free + "
                                        "4.00 GiB released by the moved processes) but 16.00 GiB arrive from GPU 0"),
              std::string::npos)
        << plan.error().message;
    // What GPU1 releases counts: with 6 GiB held there it fits exactly.
    held = std::map<std::string, uint64_t>{{kGpu0, 16 * kGiB}, {kGpu1, 6 * kGiB}};
    EXPECT_TRUE(plan_device_map("swap:0,1", gpus, held));
}

TEST(DeviceMap, UnknownMemoryIsANoteNotAnError) {
    auto plan = plan_device_map("swap:0,1", h200x2(), std::nullopt);
    ASSERT_TRUE(plan);
    ASSERT_EQ(plan->notes.size(), 1u);
    EXPECT_NE(plan->notes[0].find("not checked"), std::string::npos);
}

TEST(DeviceMap, NoGpusMeansNoMap) {
    EXPECT_FALSE(plan_device_map("swap:0,1", {}));
}

}  // namespace GPUDX_UNITY_ID
