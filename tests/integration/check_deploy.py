#!/usr/bin/env python3
"""Checks the deployment files under deploy/: they parse, and say what gpudx needs them to say.

- kubernetes/npd-gpudx.json: a node-problem-detector custom plugin config that runs `gpudx status --format
  npd` (the agent's diagnosis when it runs, else one of its own) or `gpudx diagnose --format npd` within NPD's
  5 s timeout; the command it names is run (with --root pointed at captures) and must exit
  0/1/2 with a message of at most 80 characters on one line.
- kubernetes/daemonset.yaml: parsed with PyYAML when installed (else that part is skipped): a privileged
  DaemonSet with read-only hostPath mounts of /sys, /proc, /dev, /var/log under /host, running
  `gpudx agent --root /host` with its --state-dir on a writable hostPath and its --listen port declared.
- systemd units: `systemd-analyze verify` when available (else skipped), with gpudx's path replaced by the
  built binary; any warning is a failure."""
import argparse, json, os, re, shutil, subprocess, sys

problems, notes = [], []


def check(cond, msg):
    if not cond:
        problems.append(msg)


def npd(src, gpudx, work):
    path = os.path.join(src, "deploy/kubernetes/npd-gpudx.json")
    cfg = json.load(open(path))
    check(cfg.get("plugin") == "custom", "npd: plugin is not custom")
    pc = cfg.get("pluginConfig", {})
    check(pc.get("timeout") == "5s", f"npd: pluginConfig.timeout {pc.get('timeout')}, expected 5s")
    check(pc.get("max_output_length") == 80, "npd: max_output_length is not 80")
    conds = {c["type"] for c in cfg.get("conditions", [])}
    rules = cfg.get("rules", [])
    check(len(rules) == 1, "npd: expected one rule")
    for r in rules:
        check(r.get("condition") in conds, f"npd: rule condition {r.get('condition')} is not declared")
        check(r.get("timeout") == "5s", "npd: rule timeout is not 5s")
        check(r.get("path", "").endswith("/gpudx"), f"npd: rule path {r.get('path')}")
        args = r.get("args", [])
        check(args[:3] in (["diagnose", "--format", "npd"], ["status", "--format", "npd"]), f"npd: args {args}")
        if args[0] == "status":
            check("--timeout" in args and float(args[args.index("--timeout") + 1]) < 5,
                  "npd: status --timeout must stay below the 5 s timeout")
        # The driver deadline must leave room inside NPD's timeout.
        if "--deadline" in args:
            check(float(args[args.index("--deadline") + 1]) < 5, "npd: --deadline must stay below the 5 s timeout")
        else:
            problems.append("npd: no --deadline: the default (5 s) equals NPD's timeout")
        # Run the rule's command as NPD would, against a healthy and a broken capture instead of /host.
        run_args = list(args)
        i = run_args.index("--root")
        del run_args[i:i + 2]
        if "--driver-lib-dir" in run_args:
            j = run_args.index("--driver-lib-dir")
            del run_args[j:j + 2]
        for root, want in ((os.path.join(src, "tests/fixtures/h200x2"), 0), (os.path.join(work, "fell-off-bus"), 1)):
            p = subprocess.run([gpudx] + run_args + ["--root", root, "--no-driver"], capture_output=True, text=True,
                               timeout=5)
            check(p.returncode == want, f"npd: exit {p.returncode} on {root}, expected {want}: {p.stderr}")
            msg = p.stdout.rstrip("\n")
            check("\n" not in msg and 0 < len(msg) <= 80, f"npd: message {msg!r} is not one line of 1..80 characters")
            notes.append(f"npd on {os.path.basename(root)}: exit {p.returncode}, {msg!r}")


def daemonset(src):
    path = os.path.join(src, "deploy/kubernetes/daemonset.yaml")
    try:
        import yaml
    except ImportError:
        notes.append("daemonset.yaml: PyYAML not installed, YAML not checked")
        return
    docs = list(yaml.safe_load_all(open(path)))
    check(len(docs) == 1 and docs[0]["kind"] == "DaemonSet", "daemonset: not one DaemonSet")
    ds = docs[0]
    spec = ds["spec"]["template"]["spec"]
    check(ds["spec"]["selector"]["matchLabels"].items() <= ds["spec"]["template"]["metadata"]["labels"].items(),
          "daemonset: selector does not match the pod labels")
    (c,) = spec["containers"]
    check(c["securityContext"].get("privileged") is True, "daemonset: not privileged")
    volumes = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    for host in ("/sys", "/proc", "/dev", "/var/log"):
        m = mounts.get("/host" + host)
        check(m is not None, f"daemonset: {host} not mounted at /host{host}")
        if m:
            check(m.get("readOnly") is True, f"daemonset: /host{host} is not read-only")
            check(volumes[m["name"]]["hostPath"]["path"] == host, f"daemonset: /host{host} is not hostPath {host}")
    for m in c["volumeMounts"]:
        check(m["name"] in volumes, f"daemonset: mount {m['name']} has no volume")
        if not m.get("readOnly"):
            check(not m["mountPath"].startswith("/host"), f"daemonset: host mount {m['mountPath']} is writable")
    script = " ".join(c.get("command", []) + c.get("args", []))
    check(re.search(r"gpudx agent --root /host", script) is not None, "daemonset: does not run gpudx agent --root /host")
    m = re.search(r"--state-dir (\S+)", script)
    state = mounts.get(m.group(1)) if m else None
    check(state is not None and not state.get("readOnly") and volumes[state["name"]].get("hostPath") is not None,
          "daemonset: the agent's --state-dir is not a writable hostPath mount (its events would not outlive the pod)")
    m = re.search(r"--listen \S+:(\d+)", script)
    ports = [p.get("containerPort") for p in c.get("ports", [])]
    check(m is not None and int(m.group(1)) in ports, "daemonset: the agent's --listen port is not a containerPort")
    notes.append("daemonset.yaml: parsed and checked")


def systemd(src, gpudx, work):
    analyze = shutil.which("systemd-analyze")
    if not analyze:
        notes.append("systemd-analyze not installed: units not verified")
        return
    d = os.path.join(work, "systemd")
    os.makedirs(d, exist_ok=True)
    units = []
    for name in sorted(os.listdir(os.path.join(src, "deploy/systemd"))):
        text = open(os.path.join(src, "deploy/systemd", name)).read()
        check("/usr/bin/gpudx" in text or name.endswith(".timer"), f"{name}: does not run /usr/bin/gpudx")
        with open(os.path.join(d, name), "w") as f:
            f.write(text.replace("/usr/bin/gpudx", gpudx))
        units.append(os.path.join(d, name))
    timer = open(os.path.join(src, "deploy/systemd/gpudx-check.timer")).read()
    check("Unit=gpudx-check.service" in timer, "timer does not start gpudx-check.service")
    boot = open(os.path.join(src, "deploy/systemd/gpudx-boot.service")).read()
    check("Before=slurmd.service" in boot and "Type=oneshot" in boot, "gpudx-boot.service: not oneshot before slurmd")
    p = subprocess.run([analyze, "verify", "--man=no"] + units, capture_output=True, text=True, timeout=60)
    out = (p.stdout + p.stderr).strip()
    if p.returncode != 0 and ("Failed to" in out and "manager" in out):
        notes.append(f"systemd-analyze cannot run here: {out[:200]}")
        return
    check(p.returncode == 0 and not out, f"systemd-analyze verify: exit {p.returncode}: {out}")
    notes.append(f"systemd-analyze verify: {len(units)} units clean")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--gpudx", required=True)
    ap.add_argument("--work", required=True)
    o = ap.parse_args()
    o.source, o.gpudx, o.work = (os.path.abspath(p) for p in (o.source, o.gpudx, o.work))
    shutil.rmtree(o.work, ignore_errors=True)
    os.makedirs(o.work)
    tree = os.path.join(o.work, "fell-off-bus")
    subprocess.run(["bash", "-c", f'source "{o.source}/tests/integration/lib.sh"; build_scenario "$@"', "_",
                    os.path.join(o.source, "tests/fixtures/h200x2"), os.path.join(o.source, "tests/scenarios/fell-off-bus"),
                    tree], check=True)
    npd(o.source, o.gpudx, o.work)
    daemonset(o.source)
    systemd(o.source, o.gpudx, o.work)
    for n in notes:
        print(n)
    for p in problems:
        print("FAIL:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
