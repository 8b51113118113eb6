#pragma once
// Renderers over one report model: the snapshot and its diagnosis.
#include <string>

#include "core/pieced_text.hpp"
#include "model/findings_view.hpp"

#include "model/diagnosis.hpp"
#include "model/snapshot.hpp"

namespace gpudx {

struct RenderOptions {
    bool color = false;    // ANSI colour; only when writing to a terminal
    bool verbose = false;  // text: also info findings and collector timings
};

std::string render_diagnosis_text(const Snapshot& s, const Diagnosis& d, const RenderOptions& o);
// The same text in pieces (core/pieced_text.hpp), the findings read from `findings` one at a time as the pieces are
// asked for (`d`'s own are not read): the agent's /v1/status?format=text. `findings` must outlive the pieces.
PiecedText diagnosis_text_pieces(const Snapshot& s, const Diagnosis& d, FindingsView findings, const RenderOptions& o);
std::string render_snapshot_text(const Snapshot& s);
// Each GPU's health in one or two lines (NVML, AER on its path, the nearest InfiniBand/RoCE adapters) and one line
// for the node's InfiniBand/RoCE ports; empty when the node has neither GPUs nor adapters. render/health_text.cpp.
std::string render_health_text(const Snapshot& s);

}  // namespace gpudx
