#pragma once
// The snapshot's JSON keys, declared once: each struct's fields as (key, member) pairs. The model's writer and
// reader (model/json_support.hpp) iterate these tables, and the fleet's streaming reader finds its keys in them
// by member (snapshot_key<&NvmlDevice::uuid>), so a key renamed here is renamed for both, and a reader cannot ask
// for a key the writer does not write: it does not compile.
#include <cstddef>
#include <string_view>
#include <tuple>
#include <type_traits>

#include "model/snapshot.hpp"

namespace gpudx {

template <class T, class M>
struct SchemaField {
    std::string_view key;
    M T::*member;
};

// Specialised by GPUDX_SCHEMA for every struct of the snapshot.
template <class T>
struct Schema;

template <class T>
concept HasSchema = requires { Schema<T>::fields; };

// Written and read field by field from the table (model/json_support.hpp); the snapshot itself is not, because
// its layers are written by their own files (model/<layer>_json.cpp).
template <class T>
concept FieldwiseJson = HasSchema<T> && Schema<T>::fieldwise_json;

namespace schema_detail {

template <class P>
struct MemberOf;
template <class T, class M>
struct MemberOf<M T::*> {
    using type = T;
};

template <auto Member>
consteval std::string_view find_key() {
    using T = typename MemberOf<decltype(Member)>::type;
    std::string_view found;
    std::apply(
        [&](const auto&... field) {
            auto match = [&](const auto& f) {
                if constexpr (std::is_same_v<decltype(f.member), decltype(Member)>)
                    if (f.member == Member) found = f.key;
            };
            (match(field), ...);
        },
        Schema<T>::fields);
    if (found.empty()) throw "the member is not a field of its struct's Schema";
    return found;
}

}  // namespace schema_detail

// The key a member is written under.
template <auto Member>
inline constexpr std::string_view snapshot_key = schema_detail::find_key<Member>();

}  // namespace gpudx

// Applies macro(x) to each argument (C++20 __VA_OPT__ recursion; up to 256 arguments).
#define GPUDX_PARENS ()
#define GPUDX_EXPAND(...) GPUDX_EXPAND4(GPUDX_EXPAND4(GPUDX_EXPAND4(GPUDX_EXPAND4(__VA_ARGS__))))
#define GPUDX_EXPAND4(...) GPUDX_EXPAND3(GPUDX_EXPAND3(GPUDX_EXPAND3(GPUDX_EXPAND3(__VA_ARGS__))))
#define GPUDX_EXPAND3(...) GPUDX_EXPAND2(GPUDX_EXPAND2(GPUDX_EXPAND2(GPUDX_EXPAND2(__VA_ARGS__))))
#define GPUDX_EXPAND2(...) GPUDX_EXPAND1(GPUDX_EXPAND1(GPUDX_EXPAND1(GPUDX_EXPAND1(__VA_ARGS__))))
#define GPUDX_EXPAND1(...) __VA_ARGS__
#define GPUDX_FOR_EACH(macro, ...) __VA_OPT__(GPUDX_EXPAND(GPUDX_FOR_EACH_STEP(macro, __VA_ARGS__)))
#define GPUDX_FOR_EACH_STEP(macro, first, ...) macro(first) __VA_OPT__(GPUDX_FOR_EACH_AGAIN GPUDX_PARENS(macro, __VA_ARGS__))
#define GPUDX_FOR_EACH_AGAIN() GPUDX_FOR_EACH_STEP

// A field's key is its member's name.
#define GPUDX_SCHEMA_FIELD(member) ::gpudx::SchemaField<Self, decltype(Self::member)>{#member, &Self::member},
#define GPUDX_SCHEMA_TABLE(Type, fieldwise, ...)                                                  \
    template <>                                                                                \
    struct Schema<Type> {                                                                      \
        using Self = Type;                                                                     \
        static constexpr bool fieldwise_json = fieldwise;                                      \
        static constexpr std::tuple fields{GPUDX_FOR_EACH(GPUDX_SCHEMA_FIELD, __VA_ARGS__)};   \
    };
#define GPUDX_SCHEMA(Type, ...) GPUDX_SCHEMA_TABLE(Type, true, __VA_ARGS__)

namespace gpudx {

GPUDX_SCHEMA_TABLE(Snapshot, false, schema_version, gpudx_version, collected_at, root, host, pcie, module, kernel_log,
                   libraries, devices, environment, infiniband, services, nvml, cuda, rocm_smi, collectors,
                   processes, nvml_events)

GPUDX_SCHEMA(ReadProblem, path, message)
GPUDX_SCHEMA(CollectorStatus, name, state, message, path, duration_ms, problems)

GPUDX_SCHEMA(HostInfo, hostname, kernel_release, kernel_version, boot_id, os_release, cmdline, secure_boot)
GPUDX_SCHEMA(ContainerInfo, in_container, runtime, container_id, cgroup, evidence)
GPUDX_SCHEMA(EnvironmentLayer, container, variables)

GPUDX_SCHEMA(PcieLink, speed_gts, width, speed_text)
GPUDX_SCHEMA(AerCounters, fatal, nonfatal, correctable, rootport)
GPUDX_SCHEMA(PciDevice, address, vendor_id, device_id, subsystem_vendor_id, subsystem_device_id, class_code, revision,
             vendor_name, device_name, driver, numa_node, link_current, link_max, aer_fatal, aer_nonfatal,
             aer_correctable, aer_rootport, aer_later, iommu_group, slot, parent, config_unreadable, is_gpu,
             is_nvswitch)
GPUDX_SCHEMA(PcieLayer, devices, gpus, nvswitches, aer_sample_interval_ms)

GPUDX_SCHEMA(IbPort, port, state_code, state, phys_state_code, phys_state, rate, rate_gbps, link_layer, netdev,
             counters, counters_later, counters_unread)
GPUDX_SCHEMA(IbDevice, name, pci, hca_type, board_id, fw_ver, node_guid, ports)
GPUDX_SCHEMA(InfinibandLayer, devices, sample_interval_ms)
GPUDX_SCHEMA(SystemdUnit, name, properties)
GPUDX_SCHEMA(ServicesLayer, units, source)

GPUDX_SCHEMA(LoadedModule, name, size, state, taint, version)
GPUDX_SCHEMA(ModuleFile, name, path, version, vermagic, srcversion, signer, found_by, error)
GPUDX_SCHEMA(NvidiaProcGpu, address, model, uuid, vbios, bus_type, minor, firmware, excluded, fields)
GPUDX_SCHEMA(DkmsEntry, module, version, kernel, arch, state, log)
GPUDX_SCHEMA(KfdNode, node, gpu_id, name, pci, unique_id, drm_render_minor, vendor_id, device_id, simd_count,
             gfx_target_version, properties)
GPUDX_SCHEMA(AmdGpu, pci, card, render_minor, unique_id, uuid, vbios_version, product_name, firmware, in_kfd, kfd_node,
             kfd_gpu_id, gfx_target, simd_count, rocr_index)
GPUDX_SCHEMA(ModuleLayer, kernel_release, loaded, nvidia_proc_version, nvidia_driver_version, nvidia_gpus,
             nvidia_gpus_listed, module_dir, files_unavailable, files, dkms, amdgpu_version, amdgpu_firmware, amd_gpus,
             kfd_nodes, kfd_topology_listed)

GPUDX_SCHEMA(KernelLogLine, monotonic_s, wall_time, text, topic)
GPUDX_SCHEMA(XidEvent, pci, code, pid, process, text, monotonic_s, wall_time, wall_s, gpu_instance)
GPUDX_SCHEMA(KernelLogTally, kind, device, module, code, count, first_monotonic_s, last_monotonic_s, first_wall_time,
             last_wall_time, first_text, last_text, processes, links)
GPUDX_SCHEMA(KernelLog, source, format, lines_read, lines_skipped, lines_dropped, boots_seen, window, lines_over_cap,
             lines, xids, tallies)

GPUDX_SCHEMA(LibraryCopy, path, real_path, version, version_from, found_by, present)
GPUDX_SCHEMA(ResolvedLibrary, soname, chosen, reason, copies)
GPUDX_SCHEMA(RocmInstall, path, real_path, version)
GPUDX_SCHEMA(LibrariesLayer, ld_library_path, ld_so_cache_format, ld_so_cache_source, ld_so_conf_dirs, libraries,
             cuda_symlink_target, rocm_installs, rocm_release)

GPUDX_SCHEMA(DeviceNode, path, type, major, minor, mode, gid, group, caller_can_open)
GPUDX_SCHEMA(DeviceHolder, pid, name, uid, state, cgroup, container_id, slurm_job_id, cgroup_exists, devices)
GPUDX_SCHEMA(DevicesLayer, nodes, holders, processes_scanned, processes_unreadable)

GPUDX_SCHEMA(MappedLibrary, soname, path, version, version_from, deleted)
GPUDX_SCHEMA(ProcessView, pid, state, problem, command, uid, user, slurm_job_id, own_mount_namespace, mapped, libraries,
             environment, device_nodes, open_devices, problems)

GPUDX_SCHEMA(NvmlProcess, pid, name, used_memory)
GPUDX_SCHEMA(NvlinkState, link, active, version, speed_mbps, remote_pci, remote_type)
GPUDX_SCHEMA(NvlinkErrorCounters, link, replay, recovery, crc_flit, crc_data, ecc_data, recovery_failed, recovery_events,
             receive_errors, link_integrity)
GPUDX_SCHEMA(GpuHealthSample, after_ms, clock_event_reasons, temperature_c, memory_temperature_c, power_mw, pcie_replays,
             nvlink_errors)
GPUDX_SCHEMA(RowRemapHistogram, max, high, partial, low, none)
GPUDX_SCHEMA(EccLocationCounts, location, corrected_volatile, uncorrected_volatile, corrected_aggregate,
             uncorrected_aggregate)
GPUDX_SCHEMA(GpuHealth, temperature_slowdown_c, temperature_shutdown_c, power_limit_mw, row_remap_histogram, ecc,
             retired_pages_single_bit, retired_pages_double_bit, nvlink_count, samples,
             second_sample_skipped)
GPUDX_SCHEMA(NvmlDevice, index, uuid, name, serial, bus_id, pci, domain, bus, device, minor, persistence_mode, mig_mode,
             mig_uuids, ecc_enabled, ecc_uncorrected_volatile, ecc_uncorrected_aggregate, retired_pages_pending,
             remapped_rows_correctable, remapped_rows_uncorrectable, remapped_rows_pending, remapped_rows_failure,
             fabric_state, fabric_status, fabric_clique_id, fabric_cluster_uuid, gpu_recovery_action, nvlinks, health,
             processes, unsupported, errors)
// Each driver layer's hung call (a typed HungCall in the model) is written under this key as its label, "" when
// none: model/driver_json.cpp adds it beside the fields of the tables below.
inline constexpr std::string_view kHungCallKey = "timed_out_call";
GPUDX_SCHEMA(NvmlEvent, time, index, uuid, pci, type, mask, data, gpu_instance, compute_instance)
GPUDX_SCHEMA(NvmlLayer, library_path, load_error, init_result, init_error, driver_version, nvml_version,
             cuda_driver_version, device_count, devices)
GPUDX_SCHEMA(CudaDevice, ordinal, uuid, bus_id, pci, attr_bus, attr_device, attr_domain, name, cc_major, cc_minor,
             total_memory, multiprocessor_count)
GPUDX_SCHEMA(CudaView, cuda_visible_devices, cuda_device_order, init_result, init_name, init_meaning, device_count,
             devices)
GPUDX_SCHEMA(CudaLayer, library_path, load_error, driver_version, caller, all)
GPUDX_SCHEMA(RocmSmiEcc, block, correctable, uncorrectable)
GPUDX_SCHEMA(RocmSmiTemperatureLimits, sensor, critical_mc, emergency_mc)
GPUDX_SCHEMA(RocmSmiTemperature, sensor, current_mc)
GPUDX_SCHEMA(RocmSmiHealthSample, after_ms, temperatures, throttle_status, indep_throttle_status, ecc)
GPUDX_SCHEMA(RocmSmiPeerLink, peer, peer_pci, type, hops)
GPUDX_SCHEMA(RocmSmiHealth, temperature_limits, gpu_metrics_version, xgmi_error_status, links, samples,
             second_sample_skipped)
GPUDX_SCHEMA(RocmSmiDevice, index, bdfid, pci, partition, unique_id, name, serial, vbios_version, render_minor,
             xgmi_hive_id, vram_total, ecc_enabled_blocks, ecc, health, unsupported, errors)
// probed is not written: a rocm_smi layer in the snapshot means it was asked.
GPUDX_SCHEMA(RocmSmiLayer, library_path, load_error, init_result, init_error, library_version, driver_version,
             device_count, devices)

// The fields `gpudx fleet report` reads from each of thousands of snapshots (make_node_record's inputs and the Xid
// counts): its streaming reader fills exactly these and only lexes the rest, and the test of the two readers holds
// each of them to snapshot_from_json (tests/unit/test_snapshot_keys.cpp). Every member must be in its Schema.
template <auto... Member>
struct FieldList {};

template <class T>
struct FleetFields;

template <class T>
concept FleetRead = requires { FleetFields<T>{}; };

template <> struct FleetFields<Snapshot>
    : FieldList<&Snapshot::schema_version, &Snapshot::gpudx_version, &Snapshot::collected_at, &Snapshot::host,
                &Snapshot::pcie, &Snapshot::module, &Snapshot::kernel_log, &Snapshot::libraries, &Snapshot::nvml,
                &Snapshot::cuda, &Snapshot::infiniband, &Snapshot::collectors> {};
// Whether the InfiniBand ports were read at all (absent is not "none").
template <> struct FleetFields<CollectorStatus> : FieldList<&CollectorStatus::name, &CollectorStatus::state> {};
template <> struct FleetFields<InfinibandLayer> : FieldList<&InfinibandLayer::devices> {};
template <> struct FleetFields<IbDevice> : FieldList<&IbDevice::name, &IbDevice::pci, &IbDevice::ports> {};
template <> struct FleetFields<IbPort>
    : FieldList<&IbPort::port, &IbPort::state_code, &IbPort::state, &IbPort::phys_state, &IbPort::rate,
                &IbPort::rate_gbps, &IbPort::link_layer> {};
template <> struct FleetFields<HostInfo> : FieldList<&HostInfo::hostname, &HostInfo::kernel_release> {};
template <> struct FleetFields<PcieLayer> : FieldList<&PcieLayer::devices, &PcieLayer::gpus> {};
template <> struct FleetFields<PciDevice>
    : FieldList<&PciDevice::address, &PciDevice::is_gpu, &PciDevice::is_nvswitch, &PciDevice::slot,
                &PciDevice::numa_node, &PciDevice::device_name, &PciDevice::link_current, &PciDevice::link_max> {};
template <> struct FleetFields<PcieLink> : FieldList<&PcieLink::speed_gts, &PcieLink::width> {};
template <> struct FleetFields<ModuleLayer>
    : FieldList<&ModuleLayer::kernel_release, &ModuleLayer::nvidia_driver_version, &ModuleLayer::loaded,
                &ModuleLayer::files, &ModuleLayer::nvidia_gpus> {};
template <> struct FleetFields<LoadedModule> : FieldList<&LoadedModule::name, &LoadedModule::version> {};
template <> struct FleetFields<ModuleFile> : FieldList<&ModuleFile::name, &ModuleFile::path, &ModuleFile::version> {};
template <> struct FleetFields<NvidiaProcGpu>
    : FieldList<&NvidiaProcGpu::address, &NvidiaProcGpu::model, &NvidiaProcGpu::uuid, &NvidiaProcGpu::vbios,
                &NvidiaProcGpu::minor> {};
template <> struct FleetFields<KernelLog> : FieldList<&KernelLog::xids> {};
template <> struct FleetFields<XidEvent> : FieldList<&XidEvent::pci, &XidEvent::code> {};
template <> struct FleetFields<LibrariesLayer> : FieldList<&LibrariesLayer::libraries> {};
template <> struct FleetFields<ResolvedLibrary> : FieldList<&ResolvedLibrary::soname, &ResolvedLibrary::chosen> {};
template <> struct FleetFields<LibraryCopy> : FieldList<&LibraryCopy::path, &LibraryCopy::version> {};
template <> struct FleetFields<NvmlLayer>
    : FieldList<&NvmlLayer::driver_version, &NvmlLayer::cuda_driver_version, &NvmlLayer::devices> {};
template <> struct FleetFields<NvmlDevice>
    : FieldList<&NvmlDevice::uuid, &NvmlDevice::name, &NvmlDevice::pci, &NvmlDevice::minor, &NvmlDevice::nvlinks,
                &NvmlDevice::health, &NvmlDevice::unsupported> {};
// The links a node class expects active, and where each leads (the node record's remote ends).
template <> struct FleetFields<NvlinkState>
    : FieldList<&NvlinkState::link, &NvlinkState::active, &NvlinkState::remote_pci, &NvlinkState::remote_type> {};
template <> struct FleetFields<GpuHealth> : FieldList<&GpuHealth::nvlink_count> {};
template <> struct FleetFields<CudaLayer> : FieldList<&CudaLayer::driver_version, &CudaLayer::caller, &CudaLayer::all> {};
template <> struct FleetFields<CudaView> : FieldList<&CudaView::devices> {};
template <> struct FleetFields<CudaDevice> : FieldList<&CudaDevice::uuid, &CudaDevice::name, &CudaDevice::pci> {};

}  // namespace gpudx
