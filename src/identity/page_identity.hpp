#pragma once
// The identity table of the node page (model/node_page.hpp): join_identity's rows with the disagreements between
// their sources spelled out, the job's view of each GPU, and the findings that name it.
#include <string>
#include <vector>

#include "model/diagnosis.hpp"
#include "model/node_page.hpp"
#include "model/snapshot.hpp"

namespace gpudx {

struct PageIdentity {
    std::vector<PageIdentityRow> rows;  // sorted by PCI address
    std::string allocation;             // the variables the job's view was read from; empty when none is set
};

// `findings`: the diagnosis's; a row lists the warnings and errors that name its GPU.
PageIdentity page_identity(const Snapshot& s, FindingsView findings);

// The node page of a snapshot and its diagnosis: header, identity table, collectors. The snapshot must outlive the
// page (it is drawn from, not copied); the caller adds the source, an acceptance record and events.
NodePage node_page_of(const Snapshot& s, Diagnosis d);
// The same with the findings read from their pack (the agent's), which must outlive the page: `summary`'s own
// findings are not read, and the page reads the pack's one at a time as it is drawn.
NodePage node_page_of(const Snapshot& s, const Diagnosis& summary, const PackedFindings& findings);

}  // namespace gpudx
