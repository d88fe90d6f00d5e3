import json, sys
rows=[json.loads(l) for l in open(sys.argv[1])]
by={}
for r in rows: by.setdefault(r['label'],{})[r['at']]=r
for label,m in by.items():
    s=m['start']
    for at in ['created','ranges','routes']:
        if at in m:
            r=m[at]; dt=r['t']-s['t']; c={k: round(r['cpu'].get(k,0)-s['cpu'].get(k,0),1) for k in r['cpu']}
            print(label, at, "%.1f s" % dt, "%.1f ms/node" % (1000*c['total']/2000), c)
