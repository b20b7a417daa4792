#!/usr/bin/python3
"""Draws an Ember memory timeline (memory::dump_snapshot, or ember_mnist --memory-timeline) as a stacked PNG.

  /usr/bin/python3 scripts/plot_memory.py timeline.json timeline.png [--track category|module] [--from-ms A] [--to-ms B]

One panel per device: the bytes live tensors hold over time, stacked by category (parameters, gradients, optimizer
state, activations, temporaries, workspace) or by module path. Needs matplotlib (Debian: python3-matplotlib).
"""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json")
    ap.add_argument("png")
    ap.add_argument("--track", choices=["category", "module"], default="category")
    ap.add_argument("--from-ms", type=float, default=0.0)
    ap.add_argument("--to-ms", type=float, default=float("inf"))
    args = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_memory.py: matplotlib is missing (apt-get install python3-matplotlib)")

    with open(args.json) as f:
        events = json.load(f)["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M"}
    wanted = "by " + args.track
    series = {}  # pid -> (times in ms, list of {track: bytes})
    for e in events:
        if e.get("ph") != "C" or e.get("name") != wanted:
            continue
        t = e["ts"] / 1000.0
        if t < args.from_ms or t > args.to_ms:
            continue
        ts, rows = series.setdefault(e["pid"], ([], []))
        ts.append(t)
        rows.append(e["args"])
    if not series:
        sys.exit(f"plot_memory.py: no '{wanted}' counters in {args.json} within the time range")

    fig, axes = plt.subplots(len(series), 1, figsize=(11, 3.8 * len(series)), squeeze=False)
    for ax, (pid, (ts, rows)) in zip(axes[:, 0], sorted(series.items())):
        keys = list(rows[0].keys())
        # Each sample holds until the next: draw steps by repeating every time.
        x = [t for i, t in enumerate(ts) for _ in (0, 1)][1:] + [ts[-1]]
        ys = [[r[k] / 2**20 for r in rows for _ in (0, 1)] for k in keys]
        keep = [i for i, y in enumerate(ys) if max(y) > 0]
        ax.stackplot(x, [ys[i] for i in keep], labels=[keys[i] for i in keep], linewidth=0)
        ax.set_title(f"{names.get(pid, pid)}: tensors by {args.track}")
        ax.set_xlabel("time since record_history(true) [ms]")
        ax.set_ylabel("MiB")
        ax.legend(loc="upper left", fontsize=8, ncol=3)
        ax.margins(x=0)
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)
    print(f"wrote {args.png}")


if __name__ == "__main__":
    main()
