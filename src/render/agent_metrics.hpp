#pragma once
// The agent's own metric families (gpudx_agent_*), served on its /metrics after the diagnosis's
// (docs/agent.md): what it recorded and diagnosed, what it read of the kernel log, its event store.
#include <string>

#include "model/agent_status.hpp"

namespace gpudx {

std::string render_agent_metrics(const AgentStatus& s);

}  // namespace gpudx
