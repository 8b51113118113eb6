#pragma once
// Cause and effects in one pasted text: an Xid 79 and then nvidia-smi's "Unable to determine the device handle"
// are one story, not two problems. The links are facts about the GPU stack (what a GPU off the bus, a driver of
// two versions or a fabric manager that never started makes every program above print), written as data in
// consequences.cpp.
#include <optional>
#include <vector>

#include "model/finding.hpp"

namespace gpudx {

// Folds every finding that a cause in the same list explains into that cause: the cause's message then says what
// followed, its evidence gains the effect's lines, its `followed_by` lists the effects' ids, and its severity is
// the highest of them. An effect naming a GPU is folded only into a cause naming the same GPU (PCI address); one
// naming none, into the first cause that explains it. Findings keep their order; nothing is dropped that no
// cause explains.
void fold_consequences(std::vector<Finding>& findings);

// The Xid code a kernel_log.xid finding is about (from its message "Xid 79 (..."), for the links by code.
std::optional<int> finding_xid_code(const Finding& f);

}  // namespace gpudx
