// The acceptance run in this process: the plan of sub-tests and each one run against the AcceptDriver.
#include "actions/accept.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include <fmt/format.h>

#include "actions/accept_support.hpp"
#include "core/pci_address.hpp"
#include "core/text.hpp"
#include "model/environment.hpp"

namespace gpudx {

using namespace accept_internal;

// ---- the run -------------------------------------------------------------------------------------

namespace {

class Acceptance {
public:
    Acceptance(AcceptDriver& d, const AcceptOptions& o, AcceptObserver* obs) : drv_(d), o_(o), obs_(obs) {}

    AcceptReport run() {
        auto t0 = Clock::now();
        r_ = new_accept_report(o_);

        r_.tests.push_back(make("driver.init", {}));
        plan_changed();
        run_step(0, ms(60000), [&](SubTest& t) { init(t); });
        // A short count (--expect-gpus) fails driver.init, but the GPUs that are there still get tested.
        if (!r_.gpus.empty()) {
            plan_gpu_tests();
            plan_pairs_topology();
            plan_isolation();
            plan_changed();
            // A step may append steps (the pair tests follow the topology): copy it before running.
            for (size_t i = 1; i < steps_.size() + 1 && i < r_.tests.size(); ++i) {
                Step st = steps_[i - 1];
                run_step(i, st.deadline, st.body);
            }
        }
        apply_verdict(r_);
        r_.wall_ms = ms_since(t0);
        return r_;
    }

private:
    struct Step {
        ms deadline;
        std::function<void(SubTest&)> body;
    };

    SubTest make(std::string id, const std::vector<int>& ordinals, bool required = true) {
        SubTest t;
        t.id = std::move(id);
        t.required = required;
        t.reason = "not reached";
        for (int ord : ordinals)
            if (auto* g = gpu(ord)) {
                t.subjects.push_back(g->uuid);
                t.pci.push_back(g->pci);
            }
        return t;
    }

    const AcceptGpu* gpu(int ordinal) const {
        for (auto& g : r_.gpus)
            if (g.ordinal == ordinal) return &g;
        return nullptr;
    }

    void add_step(SubTest t, ms deadline, std::function<void(SubTest&)> body, std::vector<int> needs = {}) {
        r_.tests.push_back(std::move(t));
        steps_.push_back({deadline, [this, body = std::move(body), needs = std::move(needs)](SubTest& t) {
                              for (int ord : needs)
                                  if (broken_.count(ord)) {
                                      t.status = TestStatus::not_run;
                                      t.reason = broken_[ord];
                                      return;
                                  }
                              body(t);
                          }});
    }

    void plan_changed() {
        if (obs_) obs_->planned(r_.tests);
    }

    void run_step(size_t index, ms deadline, const std::function<void(SubTest&)>& body) {
        SubTest t = r_.tests[index];  // a copy: the body may grow r_.tests
        t.status = TestStatus::pass;
        t.reason.clear();
        if (obs_) obs_->started(t, deadline);
        auto t0 = Clock::now();
        // Fault-isolation boundary: each sub-test. One that throws fails, the rest of the plan still runs.
        try {
            body(t);
        } catch (const std::exception& e) {
            add_reason(t, TestStatus::fail, std::string("internal error: ") + e.what());
        }
        t.duration_ms = ms_since(t0);
        r_.tests[index] = t;
        if (obs_) obs_->finished(t);
    }

    void init(SubTest& t) {
        auto facts = drv_.open();
        if (!facts) {
            bool absent = facts.error().sys_errno == ENODEV;
            t.status = absent ? TestStatus::not_run : TestStatus::fail;
            t.reason = facts.error().message;
            if (!facts.error().path.empty()) t.details["call"] = facts.error().path;
            return;
        }
        r_.driver_library = facts->library_path;
        r_.cuda_driver_version = facts->cuda_driver_version;
        r_.driver_version = facts->driver_version;
        auto gpus = drv_.devices();
        if (!gpus) {
            t.status = TestStatus::fail;
            t.reason = gpus.error().message;
            return;
        }
        r_.gpus = *gpus;
        // The GPUs found are the record's "gpus"; no subjects here, so this test's key stays "driver.init".
        t.figures["gpus"] = static_cast<double>(r_.gpus.size());
        t.details["library"] = facts->library_path;
        if (r_.gpus.empty()) {
            t.status = TestStatus::not_run;
            t.reason = "no GPU visible to CUDA";
        } else if (o_.expect_gpus && r_.gpus.size() < *o_.expect_gpus) {
            add_reason(t, TestStatus::fail,
                       fmt::format("CUDA sees {} GPU(s), {} expected", r_.gpus.size(), *o_.expect_gpus));
        }
        if (obs_) obs_->header(r_);
    }

    // ---- per GPU

    void plan_gpu_tests() {
        for (auto& g : r_.gpus) {
            int ord = g.ordinal;
            add_step(make("gpu.context", {ord}), ms(60000), [this, ord](SubTest& t) {
                auto r = drv_.create_context(ord);
                if (!r) {
                    add_reason(t, TestStatus::fail, r.error().message);
                    broken_[ord] = "not run: context creation failed on this GPU";
                    return;
                }
                t.figures["context_ms"] = *r;
            });
            add_step(make("gpu.compute", {ord}), ms(20000 + 100 * o_.compute_repetitions),
                     [this, ord](SubTest& t) { compute(t, ord); }, {ord});
            uint64_t mem_est = g.total_memory ? g.total_memory : (80ull << 30);
            auto mem_deadline = ms(30000 + static_cast<long>(static_cast<double>(mem_est) * o_.memory.patterns.size() *
                                                             o_.memory.passes * 2 / 100e9 * 1000));
            add_step(make("gpu.d2d", {ord}), copy_deadline(sized(o_.d2d, g, 8), 1),
                     [this, ord](SubTest& t) { device_copy(t, ord); }, {ord});
            add_step(make("gpu.h2d", {ord}), copy_deadline(sized(o_.host, g, 4), 2),
                     [this, ord](SubTest& t) { host_copy(t, ord, true); }, {ord});
            add_step(make("gpu.d2h", {ord}), copy_deadline(sized(o_.host, g, 4), 2),
                     [this, ord](SubTest& t) { host_copy(t, ord, false); }, {ord});
            // The pattern test last: after it has taken and released most of the memory in chunks, new
            // allocations can land on fragmented physical memory, and a 4 GiB copy measured 0.87-0.9 of
            // the rate a fresh allocation reaches on an H200 (docs/device-runs/).
            add_step(make("gpu.memory", {ord}), mem_deadline, [this, ord](SubTest& t) { memory(t, ord); }, {ord});
        }
    }

    // A transfer size that fits the GPU: at most total/divisor, at least 2 MiB.
    CopyPlan sized(CopyPlan p, const AcceptGpu& g, unsigned divisor) const {
        if (g.total_memory) p.bytes = std::min<uint64_t>(p.bytes, g.total_memory / divisor);
        p.bytes = std::max<uint64_t>(round_2mib(p.bytes), 2ull << 20);
        return p;
    }

    static ms copy_deadline(const CopyPlan& p, unsigned directions) {
        // A slow link (PCIe gen3 x4, ~3 GB/s) still finishes well inside this.
        return ms(15000 + static_cast<long>(static_cast<double>(p.bytes) * p.repetitions * directions / 2e9 * 1000));
    }

    void compute(SubTest& t, int ord) {
        auto r = drv_.compute(ord, o_.compute_repetitions);
        if (!r) return add_reason(t, TestStatus::fail, r.error().message);
        t.figures["threads"] = static_cast<double>(r->threads);
        t.figures["wrong_values"] = static_cast<double>(r->wrong_values);
        t.figures["sms_seen"] = r->sms_seen;
        t.figures["sm_count"] = r->sm_count;
        t.figures["repetitions"] = r->repetitions;
        if (r->seconds > 0) t.figures["kernel_ms"] = r->seconds * 1000;
        if (r->threads == 0) add_reason(t, TestStatus::fail, "the compute kernel wrote no values");
        if (r->wrong_values)
            add_reason(t, TestStatus::fail,
                       fmt::format("{} of {} values differ from the known answer", r->wrong_values, r->threads));
        if (r->sm_count && r->sms_seen < r->sm_count)
            add_reason(t, TestStatus::fail,
                       fmt::format("only {} of {} multiprocessors ran a block", r->sms_seen, r->sm_count));
    }

    void memory(SubTest& t, int ord) {
        auto r = drv_.memory(ord, o_.memory);
        if (!r) return add_reason(t, TestStatus::fail, r.error().message);
        uint64_t errors = 0;
        for (auto& p : r->patterns) {
            errors += p.errors;
            std::string name = fmt::format("{}#{}", p.pattern, p.seed);
            t.details["pattern " + name] =
                p.errors ? fmt::format("{} bad words, first at byte offset {:#x}", p.errors, p.first_error_offset.value_or(0))
                         : "ok";
        }
        double fraction = r->free_bytes ? static_cast<double>(r->tested_bytes) / r->free_bytes : 0;
        t.figures["tested_gib"] = static_cast<double>(r->tested_bytes) / (1ull << 30);
        t.figures["free_gib"] = static_cast<double>(r->free_bytes) / (1ull << 30);
        t.figures["fraction_of_free"] = fraction;
        t.figures["chunks"] = r->chunks;
        t.figures["patterns"] = static_cast<double>(r->patterns.size());
        t.figures["errors"] = static_cast<double>(errors);
        if (r->write_seconds > 0) t.figures["write_gbps"] = r->written_bytes / r->write_seconds / kGB;
        if (r->read_seconds > 0) t.figures["read_gbps"] = r->read_bytes / r->read_seconds / kGB;
        if (r->tested_bytes == 0) add_reason(t, TestStatus::fail, "no memory could be allocated");
        if (r->patterns.empty()) add_reason(t, TestStatus::fail, "no pattern ran");
        if (errors)
            add_reason(t, TestStatus::fail,
                       fmt::format("{} wrong 8-byte words over {} tested", errors, format_gib(r->tested_bytes)));
        if (!r->released) add_reason(t, TestStatus::fail, "the tested memory was not released");
        if (auto floor = o_.thresholds.min_memory_fraction) {
            t.thresholds["fraction_of_free"] = *floor;
            if (fraction < *floor)
                add_reason(t, TestStatus::fail,
                           fmt::format("covered {:.0f} % of free memory, {:.0f} % required", fraction * 100, *floor * 100));
        }
    }

    void device_copy(SubTest& t, int ord) {
        auto plan = sized(o_.d2d, *gpu(ord), 8);
        auto r = drv_.device_copy(ord, plan);
        if (!r) return add_reason(t, TestStatus::fail, r.error().message);
        record_copy(t, "d2d", *r, 2.0);
        t.details["accounting"] = "bytes read + bytes written per second (2 x size x repetitions / time)";
        hold_to_floor(t, "d2d_gbps", o_.thresholds.min_d2d_gbps, "device-to-device copy");
    }

    void host_copy(SubTest& t, int ord, bool h2d) {
        if (!host_cache_.count(ord)) host_cache_.emplace(ord, drv_.host_copies(ord, sized(o_.host, *gpu(ord), 4)));
        auto& r = host_cache_.at(ord);
        if (!r) return add_reason(t, TestStatus::fail, r.error().message);
        const auto& f = h2d ? r->h2d : r->d2h;
        record_copy(t, h2d ? "h2d" : "d2h", f, 1.0);
        t.details["memory"] = "pinned (cuMemHostAlloc)";
        hold_to_floor(t, h2d ? "h2d_gbps" : "d2h_gbps", h2d ? o_.thresholds.min_h2d_gbps : o_.thresholds.min_d2h_gbps,
                      h2d ? "host-to-device copy" : "device-to-host copy");
    }

    static void record_copy(SubTest& t, const std::string& name, const CopyFigures& f, double factor) {
        t.figures[name + "_gbps"] = gbps(f.bytes, f.repetitions, f.seconds, factor);
        t.figures[name + "_bytes"] = static_cast<double>(f.bytes);
        t.figures[name + "_repetitions"] = f.repetitions;
        t.figures[name + "_mismatches"] = static_cast<double>(f.mismatches);
        if (f.bytes == 0 || f.repetitions == 0 || f.seconds <= 0)
            add_reason(t, TestStatus::fail, name + ": the copy was not timed");
        if (f.mismatches)
            add_reason(t, TestStatus::fail,
                       fmt::format("{}: {} of {} words arrived wrong", name, f.mismatches, f.bytes / 8));
    }

    // ---- pairs

    void plan_pairs_topology() {
        auto spec = o_.thresholds.pairs && o_.pairs == "all" ? *o_.thresholds.pairs : o_.pairs;
        auto sel = select_pairs(spec, r_.gpus);
        for (auto& name : sel.unknown) {
            auto t = make("pair.copy", {});
            t.details["pair"] = name;
            add_step(std::move(t), ms(1000), [name](SubTest& t) {
                t.status = TestStatus::not_run;
                t.reason = "the permitted pair \"" + name + "\" names a GPU that CUDA does not see on this node";
            });
        }
        if (sel.pairs.empty()) return;
        pairs_ = sel.pairs;
        std::vector<int> all;
        for (auto& [a, b] : pairs_) {
            all.push_back(a);
            all.push_back(b);
        }
        auto t = make("pairs.topology", {});
        t.details["pairs"] = std::to_string(pairs_.size());
        add_step(std::move(t), ms(20000), [this](SubTest& t) { topology(t); });
    }

    void topology(SubTest& t) {
        for (auto& [a, b] : pairs_) {
            auto r = drv_.peer_info(a, b);
            std::string label = short_uuid(gpu(a)->uuid) + " " + short_uuid(gpu(b)->uuid);
            if (!r) {
                add_reason(t, TestStatus::fail, label + ": " + r.error().message);
                peers_[{a, b}] = PeerInfo{};
                continue;
            }
            peers_[{a, b}] = *r;
            t.details[label] = std::string(to_string(r->link)) + (r->link_evidence.empty() ? "" : " (" + r->link_evidence + ")");
        }
        // NVLink first, then a shared switch, then the host bridge, then across root complexes.
        auto rank = [&](const std::pair<int, int>& p) { return static_cast<int>(peers_[p].link); };
        std::stable_sort(pairs_.begin(), pairs_.end(), [&](auto& x, auto& y) { return rank(x) < rank(y); });
        for (auto& p : pairs_) {
            auto [a, b] = p;
            auto access = make("pair.peer_access", {a, b});
            access.details["link"] = to_string(peers_[p].link);
            add_step(std::move(access), ms(1000), [this, p](SubTest& t) { peer_access(t, p); }, {a, b});
            auto copy = make("pair.copy", {a, b});
            copy.details["link"] = to_string(peers_[p].link);
            add_step(std::move(copy), copy_deadline(pair_plan(a, b), 2), [this, p](SubTest& t) { pair_copy(t, p); },
                     {a, b});
        }
        auto all = make("pairs.concurrent", {});
        for (auto& [a, b] : pairs_) all.details[short_uuid(gpu(a)->uuid) + " " + short_uuid(gpu(b)->uuid)] = "both ways";
        add_step(std::move(all), copy_deadline(pair_plan(pairs_[0].first, pairs_[0].second), 2 * pairs_.size()),
                 [this](SubTest& t) { concurrent(t); });
        // Isolation steps were planned before the pair steps existed; keep them last.
        std::rotate(r_.tests.begin() + 1 + isolation_begin_, r_.tests.begin() + 1 + isolation_begin_ + isolation_count_,
                    r_.tests.end());
        std::rotate(steps_.begin() + isolation_begin_, steps_.begin() + isolation_begin_ + isolation_count_, steps_.end());
        isolation_begin_ = steps_.size() - isolation_count_;
        plan_changed();
    }

    CopyPlan pair_plan(int a, int b) const {
        auto p = sized(o_.p2p, *gpu(a), 8);
        return sized(p, *gpu(b), 8);
    }

    std::optional<double> pair_floor(PeerLink link) const {
        return link == PeerLink::nvlink ? o_.thresholds.min_p2p_gbps : o_.thresholds.min_p2p_pcie_gbps;
    }

    void peer_access(SubTest& t, std::pair<int, int> p) {
        auto& info = peers_[p];
        t.figures["a_to_b"] = info.a_to_b;
        t.figures["b_to_a"] = info.b_to_a;
        t.details["link"] = to_string(info.link);
        if (!info.a_to_b || !info.b_to_a)
            add_reason(t, TestStatus::fail,
                       fmt::format("peer access not supported ({} -> {}: {}, {} -> {}: {})", short_uuid(gpu(p.first)->uuid),
                                   short_uuid(gpu(p.second)->uuid), info.a_to_b ? "yes" : "no",
                                   short_uuid(gpu(p.second)->uuid), short_uuid(gpu(p.first)->uuid),
                                   info.b_to_a ? "yes" : "no"));
    }

    void pair_copy(SubTest& t, std::pair<int, int> p) {
        auto [a, b] = p;
        auto plan = pair_plan(a, b);
        auto link = peers_[p].link;
        for (auto [src, dst, name] : {std::tuple{a, b, "a_to_b"}, std::tuple{b, a, "b_to_a"}}) {
            auto r = drv_.peer_copy(src, dst, plan);
            if (!r) {
                add_reason(t, TestStatus::fail, std::string(name) + ": " + r.error().message);
                continue;
            }
            record_copy(t, name, *r, 1.0);
            hold_to_floor(t, std::string(name) + "_gbps", pair_floor(link),
                          fmt::format("copy {} -> {}", short_uuid(gpu(src)->uuid), short_uuid(gpu(dst)->uuid)));
        }
        if (link == PeerLink::unknown && pair_floor(link))
            t.details["floor"] = "link class unknown: held to the PCIe floor";
    }

    void concurrent(SubTest& t) {
        std::vector<std::pair<int, int>> routes;
        for (auto& [a, b] : pairs_) {
            if (broken_.count(a) || broken_.count(b)) continue;
            routes.emplace_back(a, b);
            routes.emplace_back(b, a);
        }
        if (routes.empty()) {
            t.status = TestStatus::not_run;
            t.reason = "no pair with working contexts";
            return;
        }
        auto plan = pair_plan(routes[0].first, routes[0].second);
        auto r = drv_.peer_copy_concurrent(routes, plan);
        if (!r) return add_reason(t, TestStatus::fail, r.error().message);
        if (r->size() != routes.size()) return add_reason(t, TestStatus::fail, "the driver answered for fewer routes");
        double total_bytes = 0, longest = 0;
        for (size_t i = 0; i < routes.size(); ++i) {
            auto [src, dst] = routes[i];
            auto name = fmt::format("{}_to_{}", short_uuid(gpu(src)->uuid), short_uuid(gpu(dst)->uuid));
            record_copy(t, name, (*r)[i], 1.0);
            total_bytes += static_cast<double>((*r)[i].bytes) * (*r)[i].repetitions;
            longest = std::max(longest, (*r)[i].seconds);
            // Links shared by several routes (PCIe) are expected to slow down; NVLink routes are not shared.
            auto p = std::minmax(src, dst);
            if (peers_[p].link == PeerLink::nvlink)
                hold_to_floor(t, name + "_gbps", o_.thresholds.min_p2p_gbps, "concurrent copy " + name);
        }
        if (longest > 0) t.figures["aggregate_gbps"] = total_bytes / longest / kGB;
        t.figures["routes"] = static_cast<double>(routes.size());
    }

    // ---- isolation

    void plan_isolation() {
        isolation_begin_ = steps_.size();
        std::vector<std::string> entries = o_.allow;
        std::string source = o_.allow_source.empty() && !entries.empty() ? "--allow" : o_.allow_source;
        if (entries.empty())
            if (auto a = allocation_from_environment(o_.environment)) std::tie(source, entries) = *a;
        if (entries.empty()) {
            for (auto id : {"isolation.job", "isolation.disjoint"}) {
                add_step(make(id, {}, false), ms(1000), [](SubTest& t) {
                    t.status = TestStatus::not_run;
                    t.reason = "no allocation to check: pass --allow UUID,... or run inside the job "
                               "(CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES or SLURM_JOB_GPUS set)";
                });
            }
            isolation_count_ = 2;
            return;
        }
        r_.allocation_source = source;
        r_.allocation = entries;
        // Resolve the entries to GPUs. Under CUDA_VISIBLE_DEVICES, CUDA already renumbered: an index is
        // a position in the list, so entry k is ordinal k. Other indices are NVML's (PCI bus order).
        std::vector<const AcceptGpu*> by_pci;
        for (auto& g : r_.gpus) by_pci.push_back(&g);
        std::sort(by_pci.begin(), by_pci.end(), [](auto* x, auto* y) { return normalize_pci(x->pci) < normalize_pci(y->pci); });
        std::vector<std::string> unresolved;
        std::set<std::string> allocated;
        for (size_t k = 0; k < entries.size(); ++k) {
            const auto& e = entries[k];
            const AcceptGpu* hit = nullptr;
            if (auto idx = parse_uint(trim(e)); idx && !looks_like_uuid(e)) {
                if (source == "CUDA_VISIBLE_DEVICES") {
                    for (auto& g : r_.gpus)
                        if (static_cast<size_t>(g.ordinal) == k) hit = &g;
                } else if (*idx < by_pci.size()) {
                    hit = by_pci[*idx];
                }
            } else if (auto i = find_gpu(e, r_.gpus)) {
                hit = &r_.gpus[*i];
            }
            if (hit) allocated.insert(to_lower(hit->uuid));
            else unresolved.push_back(e);
        }
        std::vector<std::string> alloc_uuids, other_uuids;
        for (auto& g : r_.gpus) (allocated.count(to_lower(g.uuid)) ? alloc_uuids : other_uuids).push_back(g.uuid);

        auto job = make("isolation.job", {});
        job.subjects = alloc_uuids;
        job.details["allocation"] = join_strings(entries, ",");
        job.details["source"] = source;
        add_step(std::move(job), ms(60000), [this, source, alloc_uuids, other_uuids, unresolved](SubTest& t) {
            if (!unresolved.empty())
                return add_reason(t, TestStatus::fail,
                                  "the allocation names " + join_strings(unresolved, ", ") + ", which CUDA does not see on this node");
            auto env = o_.environment;
            if (source == "--allow") {
                env.erase("CUDA_DEVICE_ORDER");
                env["CUDA_VISIBLE_DEVICES"] = join_strings(alloc_uuids, ",");
                env["NVIDIA_VISIBLE_DEVICES"] = join_strings(alloc_uuids, ",");
            }
            auto visible = env.find("CUDA_VISIBLE_DEVICES");
            t.details["child CUDA_VISIBLE_DEVICES"] =
                visible != env.end() ? visible->second : std::string(kUnsetVariable);
            auto views = drv_.visible_in_children({env}, ms(30000));
            if (views.size() != 1) return add_reason(t, TestStatus::fail, "the child did not report");
            judge_view(t, "", views[0], alloc_uuids, other_uuids);
        });

        // Two children at once with disjoint allocations: the allocation and the rest of the node, or
        // the allocation split in two when it is the whole node.
        std::vector<std::string> a = alloc_uuids, b = other_uuids;
        if (b.empty() && a.size() >= 2) {
            b.assign(a.begin() + a.size() / 2, a.end());
            a.resize(a.size() / 2);
        }
        auto disjoint = make("isolation.disjoint", {}, !a.empty() && !b.empty());
        disjoint.subjects = a;
        disjoint.subjects.insert(disjoint.subjects.end(), b.begin(), b.end());
        add_step(std::move(disjoint), ms(60000), [this, a, b](SubTest& t) {
            if (a.empty() || b.empty()) {
                t.status = TestStatus::not_run;
                t.reason = "needs two GPUs to give two children disjoint allocations";
                return;
            }
            auto env_for = [&](const std::vector<std::string>& set) {
                auto env = o_.environment;
                env.erase("CUDA_DEVICE_ORDER");
                env["CUDA_VISIBLE_DEVICES"] = join_strings(set, ",");
                env["NVIDIA_VISIBLE_DEVICES"] = join_strings(set, ",");
                return env;
            };
            t.details["child A"] = join_strings(a, ",");
            t.details["child B"] = join_strings(b, ",");
            auto views = drv_.visible_in_children({env_for(a), env_for(b)}, ms(30000));
            if (views.size() != 2) return add_reason(t, TestStatus::fail, "the children did not report");
            judge_view(t, "child A: ", views[0], a, b);
            judge_view(t, "child B: ", views[1], b, a);
        });
        isolation_count_ = 2;
    }

    // A child must see exactly `expected` through CUDA and NVML, and none of `forbidden`.
    static void judge_view(SubTest& t, const std::string& who, const Result<VisibleView>& view,
                           const std::vector<std::string>& expected, const std::vector<std::string>& forbidden) {
        if (!view) return add_reason(t, TestStatus::fail, who + "the child failed: " + view.error().message);
        std::set<std::string> want;
        for (auto& u : expected) want.insert(to_lower(u));
        std::set<std::string> others;
        for (auto& u : forbidden) others.insert(to_lower(u));
        auto judge = [&](const char* api, const std::optional<std::vector<std::string>>& seen, const std::string& error) {
            if (!seen) {
                add_reason(t, TestStatus::not_run, who + api + " could not be asked in the child: " + error);
                return;
            }
            t.details[who + api + " sees"] = seen->empty() ? "nothing" : join_strings(*seen, ",");
            std::set<std::string> got;
            for (auto& u : *seen) got.insert(to_lower(u));
            std::vector<std::string> missing, extra;
            for (auto& u : want)
                if (!got.count(u)) missing.push_back(u);
            for (auto& u : got)
                if (!want.count(u)) extra.push_back(u);
            if (!missing.empty())
                add_reason(t, TestStatus::fail, who + api + " does not show allocated " + join_strings(missing, ","));
            if (!extra.empty()) {
                bool foreign = std::any_of(extra.begin(), extra.end(), [&](auto& u) { return others.count(u) > 0; });
                add_reason(t, TestStatus::fail,
                           who + api + " shows " + join_strings(extra, ",") + (foreign ? " outside its allocation" : " (not allocated)") +
                               (std::string(api) == "NVML" ? ": devices are not confined (CUDA_VISIBLE_DEVICES only hides GPUs "
                                                             "from CUDA; confine /dev/nvidia* with cgroups, e.g. Slurm "
                                                             "ConstrainDevices=yes)"
                                                           : ""));
            }
        };
        judge("CUDA", view->cuda_uuids, view->cuda_error);
        judge("NVML", view->nvml_uuids, view->nvml_error);
    }

    AcceptDriver& drv_;
    const AcceptOptions& o_;
    AcceptObserver* obs_;
    AcceptReport r_;
    std::vector<Step> steps_;  // step i runs r_.tests[i + 1]
    std::map<int, std::string> broken_;
    std::map<int, Result<HostCopyFigures>> host_cache_;
    std::vector<std::pair<int, int>> pairs_;
    std::map<std::pair<int, int>, PeerInfo> peers_;
    size_t isolation_begin_ = 0, isolation_count_ = 0;
};

}  // namespace

AcceptReport run_acceptance(AcceptDriver& driver, const AcceptOptions& options, AcceptObserver* observer) {
    return Acceptance(driver, options, observer).run();
}

}  // namespace gpudx
