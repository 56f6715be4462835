"""The benchmark's report: a markdown table (one row per profiler x rate x
threads x depth, medians over the rounds), issue #4's targets met or not
with the numbers, issue #9's (the build under test against the baseline
build: steady CPU per sample, and the BPF cost of a first sighting from the
churn cells), and a PNG chart."""
import math
import os
import statistics

import modes as modes_cells

CPYTHON = "cpython-3.15"
CPYTHON_CPU = "cpython-3.15-cpu"
OURS = ("pyprof-bpf", "pyprof-remote")
BASELINE = "pyprof-baseline"


def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def summarize(results, kind="spin"):
    """(profiler, rate, threads, depth) -> medians over the rounds, of the
    cells of that workload kind."""
    groups = {}
    for r in results:
        if r.get("workload", "spin") != kind:
            continue
        groups.setdefault((r["profiler"], r["rate"], r["threads"], r["depth"]), []).append(r)
    out = {}
    for key, rs in groups.items():
        ok = [r for r in rs if "failed" not in r]
        s = dict(n=len(rs), ok=len(ok), failed=[r["failed"] for r in rs if "failed" in r])
        for k in ("samples", "achieved", "target_cores", "twin_cores", "cpu_us", "bpf_us",
                  "user_us", "steady_us", "throughput", "efficiency", "rss_mb", "bpf_runs",
                  "truncated", "errors", "lost", "loadavg", "sampling_s", "target_cs_per_s",
                  "steady_bpf_us", "units_per_s"):
            s[k] = med([r.get(k) for r in ok])
        # per sample: the BPF program's counters, and the churn output's counts
        for src in ("counters", "churn"):
            keys = {k for r in ok for k in (r.get(src) or {})}
            s[src] = {k: med([r[src][k] / r["samples"] for r in ok
                              if r.get(src) and k in r[src] and r.get("samples")])
                      for k in keys if k != "distinct"}
            if src == "churn" and keys:
                s["distinct_per_sample"] = med([r[src].get("distinct", 0) / r["samples"]
                                                for r in ok if r.get(src) and r.get("samples")])
        tp = [r["throughput"] for r in ok if r.get("throughput") is not None]
        s["throughput_min"] = min(tp) if tp else None
        s["throughput_max"] = max(tp) if tp else None
        s["rss_max"] = max([r["rss_mb"] for r in ok], default=None)
        s["events"] = next((r["events"] for r in ok if r.get("events")), None)
        out[key] = s
    return out


def fmt_us(v):
    if v is None:
        return "-"
    if v >= 100:
        return "%.0f" % v
    if v >= 10:
        return "%.1f" % v
    return "%.2f" % v


def fmt_pct(v):
    return "-" if v is None else "%.0f%%" % (100 * v) if v >= 0.995 else "%.1f%%" % (100 * v)


def table(meta, summ, profs, unavailable, configs):
    lines = [
        "| Hz | threads | depth | profiler | target | samples | rate achieved | target CPU (cores) "
        "| CPU/sample (us) | of which BPF (us) | steady CPU/sample (us) | throughput vs twin "
        "| per CPU-s vs twin | RSS (MB) |",
        "| ---: | ---: | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: "
        "| ---: |",
    ]
    for (rate, threads, depth) in sorted(configs, key=lambda c: (c[2], c[1], c[0])):
        for p in profs:
            head = "| %d | %d | %d | %s | %s " % (rate, threads, depth, p.label, p.target.label)
            if p.key in unavailable:
                lines.append(head + "| unavailable: %s |  |  |  |  |  |  |  |  |"
                             % unavailable[p.key])
                continue
            s = summ.get((p.key, rate, threads, depth))
            if s is None:
                continue
            if not s["ok"]:
                lines.append(head + "| failed (%d/%d): %s |  |  |  |  |  |  |  |  |"
                             % (len(s["failed"]), s["n"], s["failed"][0].replace("|", "/")))
                continue
            tp = "-"
            if s["throughput"] is not None:
                tp = "%.2f" % s["throughput"]
                if s["ok"] > 1:
                    tp += " (%.2f-%.2f)" % (s["throughput_min"], s["throughput_max"])
            fail = " (%d failed)" % len(s["failed"]) if s["failed"] else ""
            if s.get("lost"):
                fail += " (+%d lost)" % s["lost"]
            eff = "-" if s["efficiency"] is None else "%.2f" % s["efficiency"]
            lines.append(head + "| %d%s | %s | %.2f | %s | %s | %s | %s | %s | %.1f |" % (
                s["samples"], fail, fmt_pct(s["achieved"]), s["target_cores"], fmt_us(s["cpu_us"]),
                fmt_us(s["bpf_us"]) if p.bpf else "", fmt_us(s["steady_us"]), tp, eff,
                s["rss_max"]))
    return "\n".join(lines)


def legend(meta):
    return "\n".join([
        "How to read it (medians over %d round(s) of %d s per profiler; in each round the "
        "profilers run one after the other in shuffled order):"
        % (meta["rounds"], meta["duration"]),
        "",
        "- *samples*: thread stacks delivered.",
        "- *rate achieved*: samples / expected. Samplers that read every thread on every tick "
        "(pyprof-bpf remote, CPython, austin): expected = rate x duration x threads. Samplers "
        "that sample threads while they run on a CPU (pyprof-bpf BPF, perf cpu-clock): expected = "
        "rate x the target's CPU seconds between their start and end of sampling. With the GIL, "
        "32 threads use about one core.",
        "- *target CPU*: the profiled workload's CPU time over the measured window, in cores: a "
        "loaded machine shows here, not as a profiler failure.",
        "- *CPU/sample*: the profiler's utime + stime over its whole life (start-up and output "
        "included, children included) plus, for pyprof-bpf's BPF backend, its BPF programs' "
        "run_time_ns (kernel BPF statistics), divided by samples. *of which BPF*: that last part, "
        "spent in the target's context. perf's in-kernel sampling is not counted (it shows in "
        "the target's throughput).",
        "- *steady CPU/sample*: the same over the measured window only, which starts when the "
        "profiler is seen sampling (pyprof-bpf: its 'sampling process' line; perf: its sleep "
        "child; at least %.1f s after launch) or %.1f s after launch (CPython, austin), and ends "
        "%.1f s before its sampling does. Samples in the window are estimated pro rata of the "
        "target's CPU time (CPU-time samplers) or of wall time (the others)."
        % (meta["start_min_s"], meta["start_s"], meta["end_margin_s"]),
        "- *throughput vs twin*: iterations/s of the profiled workload over those of an identical "
        "unprofiled copy running at the same time, over the window (median, min-max over "
        "rounds). On this shared 2-CPU machine it also follows the share of CPU the scheduler "
        "gave each copy; *per CPU-s vs twin* divides that share out (but would hide a profiler "
        "that stops its target). The twin runs beside its target, so per-CPU events (perf's, "
        "pyprof-bpf's) tick on it too and this ratio hides their cost: the bystander cells "
        "(bystander.py, latest-bystander.md) compare the profiled process with itself "
        "unprofiled in interleaved windows instead.",
        "- *RSS*: the profiler's peak resident set (VmHWM, ru_maxrss), max over rounds.",
        "- *pyprof-bpf baseline (REV)*: pyprof-bpf built from REV (issue #9's baseline), run "
        "exactly like the BPF backend's row, in the same cells and rounds.",
    ])


def _verdict(ok):
    return "**met**" if ok else "**not met**"


def targets(summ, profs, configs, soak, duration):
    rates = sorted({c[0] for c in configs})
    shapes = sorted({(c[1], c[2]) for c in configs})
    out = ["## Targets (issue #4)", ""]

    # 1. CPU per sample at 10 kHz vs CPython 3.15's (both modes: wall, the
    # default, samples every thread; cpu keeps those on a CPU, as ours).
    out.append("- Profiler CPU per sample at 10 kHz <= 1/20 of CPython 3.15's profiler, "
               "same workload (against its default wall mode, and against --mode cpu, "
               "whose samples are, like pyprof-bpf's, of threads on a CPU):")
    any_ = False
    for (t, d) in shapes:
        for ours in OURS:
            s = summ.get((ours, 10000, t, d))
            if not s or not s["ok"] or s["cpu_us"] is None:
                continue
            any_ = True
            parts = []
            for key, name in ((CPYTHON, "wall"), (CPYTHON_CPU, "--mode cpu")):
                c = summ.get((key, 10000, t, d))
                if not c or not c["ok"] or c["cpu_us"] is None or not c["samples"]:
                    parts.append("%s: no result" % name)
                    continue
                ratio = c["cpu_us"] / s["cpu_us"]
                parts.append("%s %s us = 1/%.1f (needs <= %s): %s"
                             % (name, fmt_us(c["cpu_us"]), ratio, fmt_us(c["cpu_us"] / 20),
                                _verdict(ratio >= 20)))
            out.append("  - %s, %d thread(s), %d deep: %s us/sample; vs CPython %s"
                       % (ours, t, d, fmt_us(s["cpu_us"]), "; ".join(parts)))
    if not any_:
        out.append("  - not measured in this run (no 10 kHz rows)")

    # 2. 100% of the asked rate at 10 kHz, 32 threads.
    out.append("- 100% of the asked rate at 10 kHz with 32 threads (met at >= 99%: the edges of "
               "the run and the CPU-time estimate of the expected count):")
    any_ = False
    for ours in OURS:
        for d in sorted({c[2] for c in configs}):
            s = summ.get((ours, 10000, 32, d))
            if not s or not s["ok"] or s["achieved"] is None:
                continue
            any_ = True
            fired = ""
            if s.get("bpf_runs") and s.get("events") == "cpu":
                fired = ("; per-CPU events: its BPF program ran %d times on every task, "
                         "%d of them (%.1f%%) in the target" % (
                             s["bpf_runs"], s["samples"], 100.0 * s["samples"] / s["bpf_runs"]))
            elif s.get("bpf_runs"):
                fired = "; per-thread events: its BPF program ran %d times, %.1f%% of them " \
                        "delivered" % (s["bpf_runs"], 100.0 * s["samples"] / s["bpf_runs"])
            peer = summ.get(("perf", 10000, 32, d))
            if peer and peer["ok"] and peer["achieved"] is not None and ours == "pyprof-bpf":
                fired += "; perf record -p (a cpu-clock event per thread): %s" % fmt_pct(peer["achieved"])
            if s.get("target_cs_per_s"):
                fired += "; the target switched context %.0f times/s" % s["target_cs_per_s"]
            out.append("  - %s, %d deep: %s (%d samples, target %.2f cores%s): %s"
                       % (ours, d, fmt_pct(s["achieved"]), s["samples"], s["target_cores"], fired,
                          _verdict(s["achieved"] >= 0.99)))
    if not any_:
        out.append("  - not measured in this run (no 10 kHz 32-thread rows)")

    # 3. 1,000-deep <= 2x 25-deep per sample.
    out.append("- A 1,000-deep stack costs at most 2x a 25-deep one per sample (CPU/sample):")
    any_ = False
    for ours in OURS:
        parts = []
        for r in sorted(rates, reverse=True):
            for t in sorted({c[1] for c in configs}):
                a, b = summ.get((ours, r, t, 25)), summ.get((ours, r, t, 1000))
                if not (a and b and a["ok"] and b["ok"] and a["cpu_us"] and b["cpu_us"]):
                    continue
                ratio = b["cpu_us"] / a["cpu_us"]
                parts.append("%d Hz %d thr: %s -> %s us = %.2fx %s"
                             % (r, t, fmt_us(a["cpu_us"]), fmt_us(b["cpu_us"]), ratio,
                                _verdict(ratio <= 2)))
        if parts:
            any_ = True
            out.append("  - %s: %s" % (ours, "; ".join(parts)))
    if not any_:
        out.append("  - not measured in this run (needs 25- and 1,000-deep rows)")

    # 4. RSS: the verdict is the soak's; this run's short recordings are context.
    out.append("- Profiler RSS <= 32 MB after 10 minutes at 1 kHz:")
    if soak:
        out.append("  - latest soak (`scripts/bench --soak`, %s, %s, %s, %g min at %d Hz, "
                   "%d thread(s), %d deep): VmHWM %.1f MB, final VmRSS %.1f MB: %s"
                   % (soak["started"], soak["git"], soak["label"], soak["minutes"], soak["rate"],
                      soak["threads"], soak["depth"], soak["vmhwm_mb"], soak["final_rss_mb"] or 0,
                      _verdict(soak["vmhwm_mb"] <= 32 and soak["minutes"] >= 10
                               and soak["rate"] >= 1000)))
    else:
        out.append("  - not measured yet: run `scripts/bench --soak` (10 minutes), then "
                   "`scripts/bench --report DIR` to put it here")
    for ours in OURS:
        peaks = []
        for r in rates:
            vals = [s["rss_max"] for k, s in summ.items()
                    if k[0] == ours and k[1] == r and s["ok"] and s["rss_max"] is not None]
            if vals:
                peaks.append("%.1f MB at %d Hz" % (max(vals), r))
        if peaks:
            out.append("  - context, %s peak RSS in this run's %d-s recordings: %s"
                       % (ours, duration, ", ".join(peaks)))
    return "\n".join(out)


def observations(results, duration):
    """Facts the table hides: pyprof-bpf runs that kept sampling (and so cost
    their target CPU) well past their duration."""
    out = []
    late = [r for r in results if r["profiler"] in OURS and "failed" not in r
            and r.get("sampling_s") and r["sampling_s"] > duration + 0.5]
    for r in late:
        lost = ""
        if r.get("lost"):
            lost = ", %d more lost (ring buffer full)" % r["lost"]
        unseen = r.get("bpf_runs", 0) - r["samples"] - r.get("lost", 0)
        if unseen > 0 and r.get("events") != "cpu":
            lost += ", %d more taken but never read" % unseen
        out.append("- %s, %d Hz, %d threads, %d deep, round %d: its perf events sampled for "
                   "%.1f s (asked %d s); it exited after %.1f s with %d samples%s."
                   % (r["label"], r["rate"], r["threads"], r["depth"], r["round"], r["sampling_s"],
                      duration, r["wall_s"], r["samples"], lost))
    if out:
        out.insert(0, "## Observations\n")
        out.append("\npyprof-bpf keeps its perf events attached after its duration, while it "
                   "drains the ring buffer and writes its output; when the consumer is behind "
                   "(1,000-deep stacks at 10 kHz) the target keeps paying for samples that are "
                   "lost or never read.")
    return "\n".join(out)


def _ratio_line(head, base, key):
    a, b = head.get(key), base.get(key)
    if a is None or b is None or not b:
        return None, "no result"
    return a / b, "%s vs %s us = %.2fx" % (fmt_us(a), fmt_us(b), a / b)


def issue9(summ, churn_summ, meta, configs):
    """The build under test against the baseline build: steady CPU per
    sample per configuration, and the BPF cost of a first sighting."""
    base = meta.get("baseline")
    if not base:
        return ""
    name = base["name"]
    out = ["## Issue #9: against the baseline (%s)" % name, ""]
    out.append("- Steady CPU per sample grows by at most 10%% (pyprof-bpf (BPF) over the "
               "baseline %s, same cells, medians; met at <= 1.10); of which BPF and userspace "
               "(same window; per-CPU events: the program's runs on other tasks' ticks count, "
               "and how many there are per sample follows the load), and what the program "
               "counted per sample:" % name)
    met = n = 0
    logsum = 0.0
    for (rate, t, d) in sorted(configs, key=lambda c: (c[2], c[1], c[0])):
        h, b = summ.get(("pyprof-bpf", rate, t, d)), summ.get((BASELINE, rate, t, d))
        if not (h and b and h["ok"] and b["ok"]):
            continue
        ratio, text = _ratio_line(h, b, "steady_us")
        if ratio is None:
            continue
        n += 1
        met += ratio <= 1.10
        logsum += math.log(ratio)
        _, btext = _ratio_line(h, b, "steady_bpf_us")
        if None not in (h.get("steady_bpf_us"), b.get("steady_bpf_us")):
            hu, bu = h["steady_us"] - h["steady_bpf_us"], b["steady_us"] - b["steady_bpf_us"]
            btext += ", userspace %s vs %s us%s" % (fmt_us(hu), fmt_us(bu),
                                                   " = %.2fx" % (hu / bu) if bu > 0 else "")
        hc, bc = h.get("counters") or {}, b.get("counters") or {}
        if "foreign" in hc and "foreign" in bc:
            btext += " (other tasks' ticks %.1f vs %.1f per sample)" % (hc["foreign"],
                                                                        bc["foreign"])
        if hc.get("lookups"):
            btext += "; thread-state lookups %.3f per sample" % hc["lookups"]
        out.append("  - %d Hz, %d thread(s), %d deep: steady %s %s; of which BPF %s"
                   % (rate, t, d, text, _verdict(ratio <= 1.10), btext))
    if not n:
        out.append("  - not measured in this run (no cell with both builds)")
    else:
        gm = math.exp(logsum / n)
        out.append("  - met in %d of %d configurations; all of them together (geometric mean of "
                   "the ratios): %.2fx %s" % (met, n, gm, _verdict(gm <= 1.10)))
    # The cost of another task's tick (per-CPU events), from the cell both
    # phases share the shape of: its BPF time per sample less the per-thread
    # steady row's (the target's ticks alone), over its other tasks' ticks.
    churn_ = meta.get("churn") or []
    if churn_ and churn_summ.get("steady"):
        r0, t0, d0 = churn_[0][:3]
        parts = []
        for p in ("pyprof-bpf", BASELINE):
            g, st = summ.get((p, r0, t0, d0)), churn_summ["steady"].get(p)
            if not (g and st and g["ok"] and st["ok"]) or None in (g["bpf_us"], st["bpf_us"]):
                continue
            fpers = (g.get("counters") or {}).get("foreign")
            if fpers:
                parts.append("%s %.2f us" % ("pyprof-bpf" if p == "pyprof-bpf" else
                                             "the baseline",
                                             (g["bpf_us"] - st["bpf_us"]) / fpers))
        if parts:
            out.append("  - the program's run on another task's tick (per-CPU events), estimated "
                       "from the %d Hz %d-thread %d-deep cell against the per-thread steady row "
                       "below (BPF us/sample, whole recordings, difference over other tasks' "
                       "ticks per sample): %s" % (r0, t0, d0, ", ".join(parts)))

    # First sightings: the churn cells against the steady workload, same shape.
    churn = meta.get("churn") or []
    kinds = list(churn)
    if not kinds:
        return "\n".join(out)
    rate, t, d = kinds[0][0], kinds[0][1], kinds[0][2]
    out += ["", "### First sightings (%d Hz, 1 thread on a CPU at a time, %d deep, per-thread "
            "events)" % (rate, d), "",
            "Workloads: *threads*, each ~1 ms unit of work in a new thread (started and joined "
            "by the main thread); *code*, each ~0.2 ms unit in a fresh function, compiled and "
            "exec'd just before and dropped just after (a new code object per unit, freed "
            "~0.3 ms after its creation); *steady*, the steady 1-thread workload. All with "
            "`--events thread --threads`: the BPF program runs on the target's ticks only. "
            "*samples of new ones*: samples of the units' threads (threads), or at the loop's "
            "call into the fresh function with a callee frame (code); *named*: with a Python "
            "frame (threads), or naming the fresh function that ran (code, told by the call "
            "site); *wrong*: naming another one. Counters: the BPF program's, per sample.", "",
            "| workload | profiler | samples | new ones/s | BPF us/sample | CPU/sample (us) "
            "| samples of new ones | named | wrong | lookups/sample (found, missed, stale) "
            "| code objects sent/sample (lost) |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"]
    labels = {"pyprof-bpf": "pyprof-bpf (BPF)", BASELINE: "baseline %s" % name}
    for kind in [k[3] for k in kinds]:
        for p in ("pyprof-bpf", BASELINE):
            s = churn_summ.get(kind, {}).get(p)
            if not s or not s["ok"]:
                continue
            cnt, ch = s.get("counters") or {}, s.get("churn") or {}
            new = ch.get("new")
            share = lambda k: "-" if not new else "%.0f%%" % (100 * ch.get(k, 0) / new)
            look = "-"
            if "lookups" in cnt:
                look = "%.3f (%.3f, %.3f, %.3f)" % (cnt["lookups"], cnt.get("lookup_found", 0),
                                                    cnt.get("lookup_misses", 0),
                                                    cnt.get("stale_tstate", 0))
            codes = "-"
            if "codes_sent" in cnt:
                codes = "%.3f (%.3f)" % (cnt["codes_sent"], cnt.get("codes_lost", 0))
            out.append("| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                kind, labels[p], s["samples"],
                "-" if kind == "steady" or s.get("units_per_s") is None
                else "%.0f" % s["units_per_s"],
                fmt_us(s["bpf_us"]), fmt_us(s["cpu_us"]),
                "-" if not new else "%.0f%%" % (100 * new), share("named"), share("wrong"),
                look, codes))
    out.append("")
    ref = churn_summ.get("steady", {}).get("pyprof-bpf")
    what = {"threads": ("new thread", "distinct new threads sampled (from the output)"),
            "code": ("new code object", "code objects the program sent")}
    for kind in [k[3] for k in kinds if k[3] != "steady"]:
        h = churn_summ.get(kind, {}).get("pyprof-bpf")
        b = churn_summ.get(kind, {}).get(BASELINE)
        if not (h and h["ok"] and ref and ref["ok"]) or h["bpf_us"] is None:
            out.append("- %s: no result" % what[kind][0])
            continue
        per = h.get("distinct_per_sample") if kind == "threads" \
            else (h.get("counters") or {}).get("codes_sent")
        extra = (h["bpf_us"] - ref["bpf_us"])
        line = "- BPF cost of a %s: (%s us/sample on the %s churn - %s steady) / %s per sample " \
               "(%s) = " % (what[kind][0], fmt_us(h["bpf_us"]), kind, fmt_us(ref["bpf_us"]),
                            "-" if not per else "%.3f" % per, what[kind][1])
        line += ("**%.1f us** per %s" % (extra / per, what[kind][0])) if per else "no sightings"
        hn, bn = (h.get("churn") or {}), (b.get("churn") or {}) if b and b["ok"] else {}
        if hn.get("new") and bn.get("new"):
            line += "; of the samples of new ones, pyprof-bpf names %.0f%%, the baseline %.0f%%" \
                    % (100 * hn.get("named", 0) / hn["new"], 100 * bn.get("named", 0) / bn["new"])
            if bn.get("wrong"):
                line += " (and names another one in %.0f%%)" % (100 * bn["wrong"] / bn["new"])
        bref = churn_summ.get("steady", {}).get(BASELINE)
        if b and b["ok"] and b["bpf_us"] is not None and bref and bref["ok"] and per:
            bextra = b["bpf_us"] - bref["bpf_us"]
            line += ("; the baseline's BPF: %s us/sample here, %s steady, so the change adds "
                     "(%.2f - %s) / %.3f = %.1f us per %s" % (
                         fmt_us(b["bpf_us"]), fmt_us(bref["bpf_us"]), extra,
                         "%.2f" % bextra if bextra >= 0 else "(%.2f)" % bextra, per,
                         (extra - bextra) / per, what[kind][0]))
        out.append(line)
    out.append("")
    out.append("BPF us/sample: the program's run time (kernel BPF statistics) over the samples "
               "delivered, whole recording (per-thread events: its runs on the target's ticks "
               "only; in the main table, with per-CPU events, its runs on other tasks' ticks "
               "count too). Per-thread events start each new thread's period afresh: a thread "
               "that lives ~1 ms of CPU gets at most one sample (hence fewer samples than the "
               "CPU time asks for in the threads rows). The first-sighting cost "
               "is all the extra BPF time of the churn over the steady workload: for a thread, "
               "its lookup in the interpreter's thread list (2 thread states here) and its first "
               "walk, whole; for a code object, its snapshot (the object, name, file, line "
               "table) into the ring, and what the baseline pays too for a frame never seen "
               "(its co_version read); the part the change adds is the difference of the two "
               "builds' extra costs. The baseline looks up no thread and sends no code object: "
               "its samples of new threads are `[no-python-state]` until userspace's next "
               "refresh, and it names fresh code only by reading it from the target afterwards.")
    return "\n".join(out)


def chart(path, summ, profs, configs, unavailable):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        return "matplotlib: %s (scripts/install-peers.sh installs python3-matplotlib)" % e
    cfgs = sorted(configs, key=lambda c: (c[2], c[1], c[0]))
    short = {100: "100", 1000: "1k", 10000: "10k"}
    labels = ["%s Hz\n%d thr\n%d deep" % (short.get(r, str(r)), t, d) for (r, t, d) in cfgs]
    shown = [p for p in profs if p.key not in unavailable]
    metrics = [("cpu_us", "profiler CPU per sample (us, log)", True),
               ("achieved", "rate achieved (% of asked)", False),
               ("throughput", "target throughput / unprofiled twin", False)]
    fig, axes = plt.subplots(len(metrics), 1, figsize=(max(12, 1.3 * len(cfgs) + 3), 13),
                             sharex=True)
    width = 0.8 / max(1, len(shown))
    colors = ["#1f77b4", "#9ecae1", "#6baed6", "#d62728", "#2ca02c", "#9467bd", "#8c564b",
              "#e377c2"]
    for ax, (key, title, log) in zip(axes, metrics):
        for i, p in enumerate(shown):
            xs, ys = [], []
            for j, (r, t, d) in enumerate(cfgs):
                s = summ.get((p.key, r, t, d))
                v = s.get(key) if s and s["ok"] else None
                if v is None:
                    continue
                xs.append(j - 0.4 + width * (i + 0.5))
                ys.append(100 * v if key == "achieved" else v)
            ax.bar(xs, ys, width, label="%s [%s]" % (p.label, p.target.label),
                   color=colors[i % len(colors)])
        ax.set_title(title, loc="left", fontsize=12)
        ax.grid(axis="y", alpha=0.3)
        if log:
            ax.set_yscale("log")
        top = max([b.get_height() for b in ax.patches] or [1])
        if key == "achieved":
            ax.axhline(100, color="k", lw=0.8, ls="--")
            ax.set_ylim(0, max(115, min(300, top * 1.05)))
        if key == "throughput":
            ax.axhline(1.0, color="k", lw=0.8, ls="--")
            ax.set_ylim(0, max(1.25, min(4, top * 1.05)))
        for j in range(1, len(cfgs)):
            ax.axvline(j - 0.5, color="grey", lw=0.3)
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="upper center", bbox_to_anchor=(0.5, 0.965), fontsize=10,
               ncol=min(3, len(names)), frameon=False)
    axes[-1].set_xticks(range(len(cfgs)))
    axes[-1].set_xticklabels(labels, fontsize=9)
    fig.suptitle("pyprof-bpf vs peers, side by side (medians over rounds) [target interpreter]",
                 fontsize=14)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return None


def write(outdir, meta, results, profs, unavailable, configs, soak, modes=None):
    if meta.get("modes_only"):
        text = modes_only_text(meta, modes)
        with open(os.path.join(outdir, "table.md"), "w") as f:
            f.write(text)
        return text, None
    summ = summarize(results)
    chart_err = chart(os.path.join(outdir, "chart.png"), summ, profs, configs, unavailable)
    la0, la1 = meta["loadavg_start"][0], meta.get("loadavg_end", [0])[0]
    head = ("## Benchmark: pyprof-bpf vs peers (`scripts/bench%s`)\n\n"
            "%s; pyprof-bpf %s (%s); kernel %s, %d CPUs; load average %.1f at start, %.1f at end; "
            "%d round(s) x %d s; %.0f min; BPF statistics: %s.\n"
            % (" --quick" if meta["quick"] else "", meta["started"],
               meta["git"] + (" with " + meta["pyprof_args"] if meta.get("pyprof_args") else ""),
               meta["version"], meta["kernel"], meta["cpus"], la0, la1, meta["rounds"],
               meta["duration"], meta.get("elapsed_s", 0) / 60, meta.get("bpf_stats", "?")))
    changed = sorted({(r.get("max_sample_rate_before"), r.get("max_sample_rate_after"))
                      for r in results if r.get("max_sample_rate_after") is not None
                      and r.get("max_sample_rate_before") != r.get("max_sample_rate_after")})
    warn = ""
    if changed:
        warn = ("\nNote: the kernel lowered kernel.perf_event_max_sample_rate during the run (%s): "
                "interrupts took too long.\n" % ", ".join("%s -> %s" % c for c in changed))
    obs = observations([r for r in results if r.get("workload", "spin") == "spin"],
                       meta["duration"])
    churn_summ = {}
    for kind in {r.get("workload", "spin") for r in results} - {"spin"}:
        for (p, _, _, _), v in summarize(results, kind).items():
            churn_summ.setdefault(kind, {})[p] = v
    parts = [head, table(meta, summ, profs, unavailable, configs), "", legend(meta), warn,
             targets(summ, profs, configs, soak, meta["duration"]), ""]
    i9 = issue9(summ, churn_summ, meta, configs)
    if i9:
        parts += [i9, ""]
    if obs:
        parts += [obs, ""]
    if modes:
        parts += [modes_text(modes), ""]
    text = "\n".join(parts)
    with open(os.path.join(outdir, "table.md"), "w") as f:
        f.write(text)
    return text, chart_err


def soak_text(res):
    lines = ["## Soak: %s, %g min at %d Hz (%s, %d thread(s), %d deep)"
             % (res["label"], res["minutes"], res["rate"], res["target"], res["threads"],
                res["depth"]),
             "", "%s, %s." % (res["started"], res["git"]), "",
             "| minute | VmRSS (MB) | VmHWM (MB) |", "| ---: | ---: | ---: |"]
    last = -1
    for t, rss, hwm in res["timeline"]:
        m = int(t // 60)
        if m != last and rss:
            last = m
            lines.append("| %d | %.1f | %.1f |" % (m, rss / 1024, hwm / 1024))
    verdict = ("no verdict: shorter than the target's 10 minutes" if res["met"] is None
               else "**met**" if res["met"] else "**not met**")
    lines += ["", "%d samples, %.2f us CPU per sample. Peak RSS %.1f MB. RSS <= 32 MB after 10 "
              "minutes at 1 kHz: %s" % (res["samples"], res["cpu_us"], res["vmhwm_mb"], verdict),
              ""]
    return "\n".join(lines)


# -- issue #10: the cost of the off-CPU modes (modes.py) ----------------------

def _n(v):
    return "-" if v is None else "{:,.0f}".format(v)


def _ratio(sp):
    if not sp:
        return "no result"
    if sp["n"] == 1:
        return "%.3f (1 window)" % sp["median"]
    return "median %.3f (%.3f-%.3f over %d windows)" % (sp["median"], sp["min"], sp["max"],
                                                       sp["n"])


def _windows(seq, who):
    return [r for r in seq if r["profiler"] == who and "failed" not in r]


def _stats_note(seq):
    """Whether the BPF statistics were on in pyprof-bpf's ratio windows
    (not held by the benchmark there: someone else's)."""
    prof = [r for r in seq if r["profiler"] == "pyprof-bpf" and "failed" not in r]
    on = [r for r in prof if r.get("stats_on")]
    if not prof:
        return ""
    if not on:
        return "BPF statistics off in pyprof-bpf's windows"
    by = "the sysctl kernel.bpf_stats_enabled" if any(r.get("sysctl") for r in on) \
        else "a BPF_ENABLE_STATS descriptor"
    return ("BPF statistics were on in %d of pyprof-bpf's %d windows, not by this benchmark (%s, "
            "left on by another user of the machine): each run of its programs paid the "
            "statistics' floor, two clock reads, ~55-65 ns here, more than it would have"
            % (len(on), len(prof), by))


def _failed(seq):
    bad = [r for r in seq if "failed" in r]
    if not bad:
        return ""
    return "; %d profiled window(s) failed: %s" % (len(bad), bad[0]["failed"][:200])


def modes_text(m):
    out = ["## Issue #10: what the off-CPU modes cost (`scripts/bench --modes %s`)"
           % ",".join(m["cells"]), "",
           "%s; windows of %g s; load average %.1f at start, %.1f at end; %.1f min." % (
               m["started"], m["window_s"], m["loadavg_start"][0], m["loadavg_end"][0],
               m["elapsed_s"] / 60), ""]
    so, st = m.get("switch_other"), m.get("switch_target")
    c_other = None
    if so or st:
        out += ["Per run of the programs that every context switch (pyprof_switch, "
                "tp_btf/sched_switch) and wake-up (pyprof_wakeup, tp_btf/sched_wakeup) of the "
                "machine runs, during an `--mode off-cpu` recording (kernel BPF statistics over "
                "one window, held on for that window only). *above empty*: less what the same "
                "statistics give a program that does nothing (r0 = 0; exit), attached at "
                "sched_switch beside them over the same window: their own floor here (the clock "
                "reads around each run).", "",
                "| while | program | runs/s | ns per run | above empty | machine switches/s |",
                "| --- | --- | ---: | ---: | ---: | ---: |"]
        rows = []
        if so:
            if "failed" in so:
                out.append("| (a) switches of other tasks | failed: %s |  |  |  |  |"
                           % so["failed"].replace("|", "/"))
            else:
                w = so["window"]
                rows.append(("(a) an idle 3.15 target (%s switches/s) with an unprofiled pipe "
                             "ping-pong beside it (%s switches/s): switches of other tasks"
                             % (_n(w["target"]["cs_per_s"]), _n(w["pingpong"]["cs_per_s"])),
                             so, w))
                sw = so.get("programs", {}).get("pyprof_switch")
                if sw and sw["runs"]:
                    c_other = sw["ns"] / sw["runs"]
        if st:
            r = st["profiled"]
            if "failed" in r:
                out.append("| (b) switches of the target | failed: %s |  |  |  |  |"
                           % r["failed"].replace("|", "/"))
            else:
                w = r["window"]
                rows.append(("(b) a 3.15 target whose 2 threads pass a byte over pipes, %d "
                             "frames deep (%s switches/s of its own): its switch-outs (stack "
                             "walk) and switch-ins" % (modes_cells.SWITCHY_DEPTH,
                                                       _n(w["target"]["cs_per_s"])), r, w))
        for what, r, w in rows:
            progs = dict(r.get("programs", {}))
            e = r.get("empty")
            floor = e["ns"] / e["runs"] if e and e["runs"] else None
            if e:
                progs["empty program (floor)"] = e
            first = True
            for name in ("pyprof_switch", "pyprof_wakeup", "empty program (floor)"):
                v = progs.get(name)
                if not v:
                    continue
                per = v["ns"] / v["runs"]
                above = "-" if floor is None or name.startswith("empty") else "%.0f" % (per - floor)
                out.append("| %s | %s | %s | %.0f | %s | %s |" % (
                    what if first else "", name, _n(v["runs"] / w["window_s"]), per, above,
                    _n(w["machine_cs_per_s"]) if first else ""))
                first = False
            if first:
                out.append("| %s | none of its programs ran |  |  |  |  |" % what)
            if r.get("empty_failed"):
                out.append("| | no floor: %s |  |  |  |  |" % r["empty_failed"].replace("|", "/"))
        out.append("")
        if st and "failed" not in st["profiled"]:
            r = st["profiled"]
            w = r["window"]
            sw = r.get("programs", {}).get("pyprof_switch")
            S = w["target"]["cs_per_s"] * w["window_s"]
            e = r.get("empty")
            if sw and S > 0:
                # runs that were not the target's: beyond one per switch-out
                # and one per switch-in (a switch between two of its threads
                # is both in one run)
                other = max(0.0, sw["runs"] - 2 * S)
                mine = sw["ns"] - other * (c_other or 0)
                floor = e["ns"] / e["runs"] if e and e["runs"] else None
                above = ""
                if floor is not None:
                    above = " (%.0f ns above the statistics' floor: less %s runs x %.0f ns)" % (
                        (mine - (sw["runs"] - other) * floor) / S, _n(sw["runs"] - other), floor)
                out.append("- (b) per switch of the target, pyprof_switch (one switch-out with "
                           "its stack walk and kernel stack, one switch-in): (%.1f ms - %s runs "
                           "for other tasks x %s ns) / %s switches of the target = **%.0f ns**%s; "
                           "%s samples delivered, %s lost" % (
                               sw["ns"] / 1e6, _n(other),
                               "%.0f" % c_other if c_other is not None else "0 (not measured)",
                               _n(S), mine / S, above, _n(r.get("samples")), _n(r.get("lost"))))
            b, a = st["before"]["window"], st["after"]["window"]
            base = (b["target"]["events_per_s"] + a["target"]["events_per_s"]) / 2
            if base > 0:
                out.append("- (b) the target's own round trips/s: %s unprofiled (before %s, "
                           "after %s), %s while recorded with the statistics on: %.2f of it"
                           % (_n(base), _n(b["target"]["events_per_s"]),
                              _n(a["target"]["events_per_s"]),
                              _n(w["target"]["events_per_s"]),
                              w["target"]["events_per_s"] / base))
        if so and "failed" not in so:
            w = so["window"]
            sw = so.get("programs", {}).get("pyprof_switch")
            if sw and w["machine_cs_per_s"]:
                out.append("- (a) the program ran %.2f times per context switch of the machine "
                           "(/proc/stat ctxt); the target was %.2f%% of its runs"
                           % (sw["runs"] / w["window_s"] / w["machine_cs_per_s"],
                              100.0 * 2 * w["target"]["cs_per_s"] * w["window_s"]
                              / max(1, sw["runs"])))
        out.append("")

    pp = m.get("pingpong")
    if pp:
        seq = pp["seq"]
        key = ("pingpong", "events_per_s")
        rs = modes_cells.ratios(seq, "pyprof-bpf", key)
        sp = modes_cells.spread([r[0] for r in rs])
        un = _windows(seq, "none")
        out.append("A context-switch-heavy process that is not profiled (pingpong.c, a pipe "
                   "ping-pong between two processes) while pyprof-bpf records another process "
                   "(the idle target) in off-cpu mode, windows alternating with no profiler at "
                   "all (target >= 0.97 of its throughput):")
        out.append("- round trips/s profiled over the unprofiled windows around: %s: %s" % (
            _ratio(sp), "no result" if not sp else
            ("**met**" if sp["median"] >= 0.97 else "**not met**")))
        if rs:
            out.append("- windows: %s" % ", ".join("%.3f (%s/%s)" % (r, _n(v), _n(b))
                                                  for r, v, b in rs))
        eff = modes_cells.spread([r[0] for r in modes_cells.ratios(
            seq, "pyprof-bpf", modes_cells.per_cpu_s("pingpong", "events_per_s"))])
        if eff:
            out.append("- round trips per CPU-second of its two processes (what is left once "
                       "the share of CPU the scheduler gave them is divided out), same windows: "
                       "%s" % _ratio(eff))
        if un:
            med = statistics.median
            out.append("- unprofiled: median %s round trips/s (%s-%s), its two processes "
                       "switching %s times/s, the machine %s/s; profiled: median %s"
                       % (_n(med([r["window"]["pingpong"]["events_per_s"] for r in un])),
                          _n(min(r["window"]["pingpong"]["events_per_s"] for r in un)),
                          _n(max(r["window"]["pingpong"]["events_per_s"] for r in un)),
                          _n(med([r["window"]["pingpong"]["cs_per_s"] for r in un])),
                          _n(med([r["window"]["machine_cs_per_s"] or 0 for r in un])),
                          _n(med([r["window"]["pingpong"]["events_per_s"]
                                  for r in _windows(seq, "pyprof-bpf")] or [0]))))
        out.append("- %s%s" % (_stats_note(seq), _failed(seq)))
        out.append("")

    g = m.get("gil")
    if g:
        seq = g["seq"]
        key = ("target", "work_per_s")
        P = g["params"]
        out.append("A %d-thread 3.15 target handing the GIL over (each thread %d frames deep: %d "
                   "units of short pure-Python work, then a %g ms sleep), its units of work per "
                   "second while recorded at %d Hz, against the unprofiled windows around "
                   "(pyprof-bpf's target >= 0.95):" % (P["threads"], P["depth"], P["units"],
                                                        P["sleep"] * 1e3, g["rate"]))
        for who, label, target in (("pyprof-bpf", "pyprof-bpf --mode wall -F %d" % g["rate"],
                                    0.95),
                                   ("cpython", "CPython 3.15 profiling.sampling --mode wall "
                                    "-r %d -a (peer)" % g["rate"], None)):
            if who == "cpython" and g.get("cpython_unavailable"):
                out.append("- %s: unavailable: %s" % (label, g["cpython_unavailable"]))
                continue
            rs = modes_cells.ratios(seq, who, key)
            sp = modes_cells.spread([r[0] for r in rs])
            ws = _windows(seq, who)
            verdict = ""
            if target is not None and sp:
                verdict = ": **met**" if sp["median"] >= target else ": **not met**"
            extra = ""
            if ws:
                extra = "; %s samples per recording, profiler CPU %.2f s per recording" % (
                    _n(statistics.median([r.get("samples", 0) for r in ws])),
                    statistics.median([r.get("cpu_s", 0) for r in ws]))
            eff = modes_cells.spread([r[0] for r in modes_cells.ratios(
                seq, who, modes_cells.per_cpu_s("target", "work_per_s"))])
            if eff:
                extra += "; per CPU-second of the target: %s" % _ratio(eff)
            out.append("- %s: %s%s (%s)%s" % (label, _ratio(sp), verdict,
                                              ", ".join("%.3f" % r[0] for r in rs), extra))
        un = _windows(seq, "none")
        if un:
            med = statistics.median
            out.append("- unprofiled: median %s units/s, GIL hand-overs %s/s, the target "
                       "switching %s times/s on %.2f cores"
                       % (_n(med([r["window"]["target"]["work_per_s"] for r in un])),
                          _n(med([r["window"]["target"]["events_per_s"] for r in un])),
                          _n(med([r["window"]["target"]["cs_per_s"] for r in un])),
                          med([r["window"]["target"]["cores"] for r in un])))
        for who in ("pyprof-bpf", "cpython"):
            ws = _windows(seq, who)
            if ws:
                med = statistics.median
                out.append("- under %s: GIL hand-overs %s/s, the target switching %s times/s"
                           % (who, _n(med([r["window"]["target"]["events_per_s"] for r in ws])),
                              _n(med([r["window"]["target"]["cs_per_s"] for r in ws]))))
        st = g.get("stats")
        if st and "failed" not in st and st.get("programs"):
            w = st["window"]
            e = st.get("empty")
            floor = e["ns"] / e["runs"] if e and e["runs"] else 0
            parts, tot, tot_above = [], 0.0, 0.0
            for name, v in sorted(st["programs"].items(), key=lambda kv: -kv[1]["ns"]):
                per = v["ns"] / v["runs"]
                parts.append("%s %s runs/s x %.0f ns" % (name, _n(v["runs"] / w["window_s"]),
                                                          per))
                tot += v["ns"]
                tot_above += v["ns"] - v["runs"] * floor
            cpu = w["target"]["cores"] * w["window_s"] * 1e9
            out.append("- pyprof-bpf's programs in wall mode on this target (one more recording, "
                       "statistics held): %s; together %.1f ms per second (%.1f above the "
                       "statistics' floor of %.0f ns a run), %.1f%% of the target's CPU time "
                       "(%.2f cores)" % ("; ".join(parts), tot / 1e6 / w["window_s"],
                                         tot_above / 1e6 / w["window_s"], floor,
                                         100 * tot / cpu if cpu else 0, w["target"]["cores"]))
        out.append("- %s%s" % (_stats_note(seq), _failed(seq)))
        out.append("")
    if m.get("cells") and "pingpong" in m["cells"] or "gil" in m.get("cells", []):
        out.append("Ratios: each profiled window's rate over the mean of the unprofiled windows "
                   "just before and after it, on the same running processes (profiler start-up "
                   "and exit fall outside the windows). This 2-CPU VM is shared: read the "
                   "spread as the noise.")
    return "\n".join(out)


def modes_only_text(meta, m):
    head = ("## Benchmark: issue #10's mode cells only (`scripts/bench --modes-only`)\n\n"
            "%s; pyprof-bpf %s (%s); kernel %s, %d CPUs.\n"
            % (meta["started"], meta["git"] + (" with " + meta["pyprof_args"]
                                               if meta.get("pyprof_args") else ""),
               meta["version"], meta["kernel"], meta["cpus"]))
    return head + "\n" + (modes_text(m) if m else "no result") + "\n"
