#!/usr/bin/env bash
# The node is listed in its inventory class as a 1-GPU node (--expect-gpus 1), but it has two H200s on
# PCIe: the second card was added and the inventory (or the node's class) never updated.
true
