"""Kernel event histograms beside a VM run: `kernel-run --vm --trace-hist`, `--kprobe`.

The guest (crates/guest/src/trace.rs) installs a hist trigger on each asked event for
the length of each rep and sends back the kernel's table (tracing/events/S/E/hist). This
module checks the options before anything boots, turns them into the guest plan's
entries, and reads the tables into kernel-side rows: `hist:EVENT` (the event's hits in
the rep) and `hist:EVENT{KEY=VALUE,...}` (its hits per key), and with VALS the sums of
those fields, `hist:EVENT.FIELD` and `hist:EVENT{KEY=VALUE,...}.FIELD`. For the vmscan
tracepoints the model fires too (MODEL_EVENTS, crates/core/src/mm/trace_vmscan.rs: on the
classic LRU, and MGLRU's evict_folios and scan_folios from 6.12 on, as the kernel fires
them) the model keeps the same table (the scenario's `tracepoints`), summed here over
the keys the trigger names, and the rows are compared; the others are the kernel's
alone.

    --trace-hist SUBSYSTEM:EVENT:KEYS[:VALS][ if FILTER]
        workqueue:workqueue_execute_start:function.sym
        sched:sched_switch:prev_comm,next_comm if prev_state == 0
        vmscan:mm_vmscan_lru_shrink_inactive:priority:nr_scanned,nr_reclaimed
        kprobes:age:common_timestamp.buckets=100000000   (hits per 100 ms)
    --kprobe 'NAME SYMBOL [FETCHARGS...]'  (an event kprobes:NAME)
        'prio vmpressure_prio prio=%dx:s32'   then  --trace-hist kprobes:prio:prio
"""

from __future__ import annotations

import re

from .sidebyside import KernelRunError
from .term import printable

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
# A key is a field with at most one modifier; `.buckets=N` (or `.bucket=N`) groups a
# number into ranges of N (kernel/trace/trace_events_hist.c, parse_field).
_KEY = r"[A-Za-z0-9_]+(?:\.(?:[A-Za-z0-9_]+|buckets?=[1-9][0-9]*))?"
_SPEC = re.compile(rf"^({_NAME}):({_NAME}):({_KEY}(?:,{_KEY})*)(?::([A-Za-z0-9_,]+))?(?: if (.+))?$")
_KPROBE = re.compile(rf"^({_NAME}) ([A-Za-z0-9_.]+(?:\+[0-9]+)?)((?: [^ ]+)*)$")
SPEC_FORMAT = "SUBSYSTEM:EVENT:KEYS[:VALS][ if FILTER], e.g. workqueue:workqueue_execute_start:function.sym"
# The events the model fires (trace_vmscan.rs): the key fields its table has, and the
# value fields.
MODEL_EVENTS = {
    "vmscan/mm_vmscan_lru_shrink_inactive": (("nid", "priority"), ("nr_scanned", "nr_reclaimed")),
    "vmscan/mm_vmscan_lru_shrink_active": (
        ("nid", "priority"),
        ("nr_taken", "nr_active", "nr_deactivated", "nr_referenced"),
    ),
    "vmscan/mm_vmscan_lru_isolate": (("lru", "order"), ("nr_requested", "nr_scanned", "nr_skipped", "nr_taken")),
    # The shadow-node shrinker's (the model's one), its scan function keyed by symbol.
    "vmscan/mm_shrink_slab_start": (
        ("shrink.sym", "nid", "priority"),
        ("nr_objects_to_shrink", "cache_items", "delta", "total_scan"),
    ),
    "vmscan/mm_shrink_slab_end": (("shrink.sym", "nid"), ("unused_scan", "new_scan", "retval", "total_scan")),
}
KPROBE_FORMAT = "'NAME SYMBOL[+OFFSET] [FETCHARGS...]', e.g. 'prio vmpressure_prio prio=%dx:s32'"


def _one_line(option: str, text: str, allowed: str) -> None:
    if not text.isprintable() or not text.strip():
        raise KernelRunError(f"{option} {printable(text)!r}: allowed {allowed}")


def hist_entries(specs: list[str]) -> list[dict]:
    """The guest plan's `hists` from --trace-hist's values: {"event": "S/E", "trigger":
    "hist:keys=...[ if ...]", "name": "E"}. One histogram per event."""
    out, seen = [], set()
    for spec in specs:
        _one_line("--trace-hist", spec, SPEC_FORMAT)
        m = _SPEC.match(spec.strip())
        if not m:
            raise KernelRunError(f"--trace-hist {printable(spec)!r}: allowed {SPEC_FORMAT}")
        subsys, event, keys, vals, filt = m.groups()
        if event in seen:
            raise KernelRunError(f"--trace-hist {printable(spec)!r}: the event {event} has a histogram already (one per event)")
        seen.add(event)
        trigger = f"hist:keys={keys}" + (f":vals={vals}" if vals else "") + (f" if {filt.strip()}" if filt else "")
        out.append({
            "event": f"{subsys}/{event}", "trigger": trigger, "name": event,
            "keys": keys.split(","), "vals": vals.split(",") if vals else [], "filter": filt,
        })
    return out


def kprobe_lines(defs: list[str]) -> list[str]:
    """The guest plan's `kprobes` (lines of tracing/kprobe_events) from --kprobe's values."""
    out = []
    for d in defs:
        _one_line("--kprobe", d, KPROBE_FORMAT)
        m = _KPROBE.match(" ".join(d.split()))
        if not m:
            raise KernelRunError(f"--kprobe {printable(d)!r}: allowed {KPROBE_FORMAT}")
        name, symbol, args = m.groups()
        out.append(f"p:{name} {symbol}{args}")
    return out


def parse_hist(text: str) -> tuple[dict[str, dict[str, int]], int, int]:
    """(per key its hitcount and value sums, total hits, dropped) from a hist file's
    text. A key is "name=value,..." in the table's key order; a .sym key's address is left
    out; the sums are named by their fields ({"hitcount": 3, "nr_scanned": 96})."""
    per_key: dict[str, dict[str, int]] = {}
    hits = dropped = 0
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("{") and "}" in s:
            inside, after = s[1:].rsplit("}", 1)
            counts = {name: int(v) for name, v in re.findall(r"(\w+):\s*(-?\d+)", after)}
            if "hitcount" not in counts:
                continue
            parts = []
            for part in inside.split(", "):
                name, _, value = part.partition(":")
                value = re.sub(r"^\[[0-9a-fA-F]+\]\s*", "", value.strip())
                # A .buckets=N key prints its range as "~ LOW-HIGH".
                value = re.sub(r"^~\s+(\d+-\d+)$", r"\1", value)
                parts.append(f"{name.strip()}={' '.join(value.split())}")
            _add(per_key, ",".join(parts), counts)
        elif s.startswith("Hits:"):
            hits = int(s.split(":", 1)[1])
        elif s.startswith("Dropped:"):
            dropped = int(s.split(":", 1)[1])
    return per_key, hits, dropped


def _add(per_key: dict[str, dict[str, int]], key: str, counts: dict[str, int]) -> None:
    """Add one table line's (or model row's) hitcount and sums to its key's."""
    mine = per_key.setdefault(key, {})
    for name, v in counts.items():
        mine[name] = mine.get(name, 0) + v


def _table_rows(name: str, hits: int, per_key: dict[str, dict[str, int]]) -> dict[str, int]:
    """The rows of one event's table: its hits, each value field's sum, then per key
    (most hits first) its hits and sums. Both sides' tables are named this way."""
    fields = sorted({f for c in per_key.values() for f in c} - {"hitcount"})
    rows = {f"hist:{name}": hits}
    for f in fields:
        rows[f"hist:{name}.{f}"] = sum(c.get(f, 0) for c in per_key.values())
    for key, c in sorted(per_key.items(), key=lambda kv: (-kv[1]["hitcount"], kv[0])):
        rows[f"hist:{name}{{{key}}}"] = c["hitcount"]
        for f in fields:
            rows[f"hist:{name}{{{key}}}.{f}"] = c.get(f, 0)
    return rows


def hist_rows(entries: list[dict], texts: list[str]) -> tuple[dict[str, int], int]:
    """One rep's rows from its tables (in `entries`' order), and the hits the kernel
    dropped (a full table)."""
    rows: dict[str, int] = {}
    dropped = 0
    for e, text in zip(entries, texts):
        per_key, hits, d = parse_hist(text)
        dropped += d
        rows.update(_table_rows(e["name"], hits, per_key))
    return rows, dropped


def model_support(entry: dict) -> str | None:
    """None when the model keeps the entry's table (the event, its keys and values), else
    why its rows are the kernel's alone."""
    model = MODEL_EVENTS.get(entry["event"])
    if model is None:
        return "a kernel event histogram (--trace-hist): the model does not fire this event"
    if entry.get("filter"):
        return "a filtered histogram: the model's table has no filter"
    keys, fields = model
    bad = [k for k in entry["keys"] if k not in keys] + [v for v in entry["vals"] if v not in fields]
    if bad:
        return f"the model's table has no field {bad[0]} (keys {', '.join(keys)}; values {', '.join(fields)})"
    return None


def _field(key: str) -> str:
    """A key's field name, as the kernel's table prints it (without its modifier)."""
    return key.split(".", 1)[0]


def model_rows(entries: list[dict], table: list[dict]) -> dict[str, int]:
    """The rows of `entries` (each one the model keeps: model_support) from one run's
    `tracepoints` table, named as hist_rows names the kernel's."""
    rows: dict[str, int] = {}
    for e in entries:
        per_key: dict[str, dict[str, int]] = {}
        for r in table:
            if r["event"] == e["name"]:
                key = ",".join(f"{_field(k)}={r[_field(k)]}" for k in e["keys"])
                _add(per_key, key, {f: r[f] for f in ["hitcount", *e["vals"]]})
        rows.update(_table_rows(e["name"], sum(c["hitcount"] for c in per_key.values()), per_key))
    return rows


def split_by_model(entries: list[dict]) -> tuple[list[dict], dict[str, str]]:
    """(the entries the model keeps a table for, and for the others' rows why they are the
    kernel's alone: assemble's `kernel_only`, by row-name base)."""
    modeled = [e for e in entries if model_support(e) is None]
    why_not = {f"hist:{e['name']}": why for e in entries if (why := model_support(e))}
    return modeled, why_not


def add_model_rows(modeled: list[dict], tables: list[list], sims: list[dict], reps: list[dict]) -> None:
    """Put each model run's rows of `modeled` (from its tracepoints table) into its
    counters `sims`, and give the kernel's reps every hist row either side has (0 where a
    rep had no hit), so a key only the model's runs hit is a row too."""
    for s, t in zip(sims, tables):
        s.update(model_rows(modeled, t))
    for s in sims:
        for name in s:
            if name.startswith("hist:") and reps:
                reps[0].setdefault(name, 0)
    union_rows(reps)


def union_rows(counters: list[dict]) -> None:
    """Give every rep's counters each hist row any rep has (0 where it had no hit)."""
    names: list[str] = []
    for c in counters:
        names.extend(n for n in c if n.startswith("hist:") and n not in names)
    for c in counters:
        for n in names:
            c.setdefault(n, 0)
