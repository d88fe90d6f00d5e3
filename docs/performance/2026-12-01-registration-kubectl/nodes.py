# Writes a List of N Node objects as a kubelet registers them (addresses,
# Ready now), for kubectl create -f.
import json, sys, datetime
n = int(sys.argv[1])
now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
items = []
for i in range(n):
    items.append({"apiVersion": "v1", "kind": "Node",
                  "metadata": {"name": "sim-%05d" % i, "labels": {"k1m.dev/simulated": "true"}},
                  "status": {"addresses": [{"type": "InternalIP", "address": "fd77::%x" % (i + 1)},
                                           {"type": "Hostname", "address": "sim-%05d" % i}],
                             "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                             "message": "simulated", "lastHeartbeatTime": now, "lastTransitionTime": now}]}})
json.dump({"apiVersion": "v1", "kind": "List", "items": items}, sys.stdout)
