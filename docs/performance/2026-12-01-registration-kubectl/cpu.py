# Prints the CPU seconds (user+system, live processes and reaped children)
# of a process tree, as JSON by program (argv[0] base name, and argv[1]
# for the k1m binary: "k1m kube-controller-manager"), with "total".
import json, os, sys
root = int(sys.argv[1])
tick = os.sysconf("SC_CLK_TCK")
procs = {}
for d in os.listdir("/proc"):
    if not d.isdigit():
        continue
    try:
        with open(f"/proc/{d}/stat") as f:
            s = f.read()
        with open(f"/proc/{d}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        continue
    rest = s[s.rindex(")") + 2:].split()
    name = os.path.basename(argv[0].decode()) if argv and argv[0] else "?"
    if name == "k1m" and len(argv) > 1:
        name += " " + argv[1].decode()
    procs[int(d)] = (int(rest[1]), sum(int(x) for x in rest[11:15]), name)
def desc(p):
    yield p
    for c, v in procs.items():
        if v[0] == p:
            yield from desc(c)
out = {}
for p in desc(root):
    if p in procs:
        out[procs[p][2]] = out.get(procs[p][2], 0) + procs[p][1] / tick
out["total"] = sum(v for k, v in out.items())
print(json.dumps(out))
