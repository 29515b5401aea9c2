"""Verdicts of `gpuscale-tui check`: pure functions from measured facts to ok / warn / fail.

Every item carries the measured figure and the expected one. The thresholds are judgement,
written down here so that they can be argued with: a rented box "fails" where a run on it
would give a result that does not stand for the hardware it was listed as (a link trained to
x4 or Gen1, a lowered power limit, hardware slowdown, another tenant on the GPU), and "warns"
where the result would be fair but lower than the same hardware can give elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from engine.check.facts import BoxFacts, ExpectedHardware, GpuFacts, HostFacts, PairFacts
from engine.events import CheckItem, CheckStatus, Verdict
from engine.probe.bandwidth import NVLINK_FAMILIES, NVLINK_GBPS_PER_LINK, PCIE_GBPS_PER_LANE

OK: CheckStatus = "ok"
WARN: CheckStatus = "warn"
FAIL: CheckStatus = "fail"
NA: CheckStatus = "n/a"
_RANK = {NA: 0, OK: 1, WARN: 2, FAIL: 3}
GIB = 1 << 30

# What a link gives in practice, per direction, against its line rate after coding (PCIe Gen4
# x16: 31.5 GB/s on paper, about 25 GB/s in a host-to-device copy).
PRACTICAL_FRACTION = 0.8
H2D_OK, H2D_WARN = 0.7, 0.4  # measured / practical: below WARN the link is not what it says
D2D_OK, D2D_WARN = 0.6, 0.3
ALLREDUCE_OK, ALLREDUCE_WARN = 0.5, 0.25  # NCCL busbw needs big messages to reach the link
NO_P2P_FACTOR = 0.4  # copies staged through host memory: a rough share of one PCIe link
POWER_WARN, POWER_FAIL = 0.97, 0.85  # enforced / default power limit
TEMP_SLOWDOWN_DEFAULT_C = 90.0  # where NVML cannot say (most data-centre GPUs: 85-95 C)
CORES_PER_GPU_OK, CORES_PER_GPU_WARN = 4, 2  # Triton's front end + the load generator per GPU
RAM_PER_GPU_FAIL_GIB = 16
DISK_OK_GIB, DISK_WARN_GIB = 5, 1
OTHERS_CPU_WARN = 0.10  # of the usable cores, taken by processes that are not ours
STEAL_WARN = 0.02
LOAD_PER_CORE_WARN = 0.5  # the 1-minute load average per usable core, before our run adds to it
MEMORY_PRESSURE_WARN = 1.0  # PSI some avg10, %
CONTENDED_NOTE = ("other work shares these cores: figures measured now read the box's noise (levels where "
                  "others take more than load.contended_percent are marked contended and measured again)")
MEM_USED_WARN, MEM_USED_FAIL = 0.10, 0.50  # of a GPU's memory, held before the run starts
MPS_MISSING = ("the embedded server runs without MPS: its model instances take turns on each GPU "
               "(docs/results/mps_h200.md: what MPS gains)")

# nvmlClocksEventReason* bits (nvml.h)
THROTTLE_BITS: dict[int, tuple[str, CheckStatus]] = {
    0x8: ("hardware slowdown", FAIL),
    0x40: ("hardware thermal slowdown", FAIL),
    0x80: ("hardware power brake", FAIL),
    0x20: ("software thermal slowdown", WARN),
}
POWER_CAP_BIT = 0x4  # normal at full load; at idle it means a very low limit


def item(name: str, scope: str, status: CheckStatus, measured: str = "", expected: str = "", note: str = "") -> CheckItem:
    return CheckItem(name=name, scope=scope, status=status, measured=measured, expected=expected, note=note)


def worst(statuses: Iterable[CheckStatus]) -> CheckStatus:
    return max(statuses, key=_RANK.__getitem__, default=NA)


def _gb(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f} GB/s"


def _gib(value: float | None) -> str:
    return "n/a" if value is None else f"{value / GIB:.0f} GiB"


def _ratio_status(measured: float, expected: float, ok: float, warn: float) -> CheckStatus:
    ratio = measured / expected if expected > 0 else 1.0
    return OK if ratio >= ok else (WARN if ratio >= warn else FAIL)


def pcie_practical_gbps(gen: int | None, width: int | None) -> float | None:
    if gen not in PCIE_GBPS_PER_LANE or not width:
        return None
    return PCIE_GBPS_PER_LANE[gen] * width * PRACTICAL_FRACTION


def nvlink_practical_gbps(gpu_name: str | None, links: int) -> float | None:
    upper = (gpu_name or "").upper()
    family = next((f for f in NVLINK_FAMILIES if f[0] in upper), None)
    if family is None or links <= 0:
        return None
    return NVLINK_GBPS_PER_LINK[family[1]] * links * PRACTICAL_FRACTION


# --------------------------------------------------------------------------- per GPU


def _link_now(g: GpuFacts) -> tuple[int | None, int | None]:
    """The link to judge: under load where a load ran (idle links train down), else idle."""
    if g.load is not None and (g.load.pcie_gen or g.load.pcie_width):
        return g.load.pcie_gen or g.pcie_gen, g.load.pcie_width or g.pcie_width
    return g.pcie_gen, g.pcie_width


def judge_pcie(g: GpuFacts) -> CheckItem:
    scope = f"GPU {g.index}"
    gen, width = _link_now(g)
    loaded = g.load is not None and gen is not None
    if gen is None or width is None:
        return item("pcie link", scope, NA, note="NVML cannot read the PCIe link here")
    measured = f"Gen{gen} x{width}" + (" under load" if loaded else " idle")
    if loaded and (g.pcie_gen, g.pcie_width) != (gen, width):
        measured += f" (idle Gen{g.pcie_gen} x{g.pcie_width})"
    top_gen = g.pcie_gen_max or gen
    top_width = g.pcie_width_max or width
    expected = f"Gen{top_gen} x16"
    status, notes = OK, list[str]()
    if width <= 4:
        status, notes = FAIL, notes + [f"x{width}: a riser or a narrow slot, a quarter of x16 or less"]
    elif width < top_width or width < 16:
        status, notes = WARN, notes + [f"x{width} where x16 is the norm for this GPU"]
    gpu_gen = g.pcie_gen_gpu_max or top_gen
    if loaded:
        if gen <= 2 < gpu_gen:
            status, notes = FAIL, notes + [f"Gen{gen} under load: the link trained down or the slot is that old"]
        elif gen < top_gen:
            status = worst([status, WARN])
            notes.append(f"trained to Gen{gen} under load where the slot allows Gen{top_gen}")
    elif gen < top_gen:
        status = worst([status, WARN])
        notes.append("idle reading only (no load could run): links train down when idle, so this cannot tell")
    if g.pcie_gen_max and g.pcie_gen_gpu_max and g.pcie_gen_max < g.pcie_gen_gpu_max:
        status = worst([status, WARN])
        notes.append(f"the slot allows Gen{g.pcie_gen_max}, the GPU can do Gen{g.pcie_gen_gpu_max}")
    return item("pcie link", scope, status, measured, expected, "; ".join(notes))


def judge_power(g: GpuFacts) -> CheckItem:
    scope = f"GPU {g.index}"
    if g.power_limit_w is None or not g.power_default_w:
        return item("power limit", scope, NA, note="NVML cannot read the power limits here")
    ratio = g.power_limit_w / g.power_default_w
    status = OK if ratio >= POWER_WARN else (WARN if ratio >= POWER_FAIL else FAIL)
    note = "" if status == OK else f"lowered to {ratio * 100:.0f} % of the default: clocks drop under load"
    return item("power limit", scope, status, f"{g.power_limit_w:.0f} W", f"{g.power_default_w:.0f} W", note)


def judge_throttle(g: GpuFacts) -> CheckItem:
    scope = f"GPU {g.index}"
    idle = g.throttle_reasons
    load = g.load.throttle_reasons if g.load is not None else None
    if idle is None and load is None:
        return item("clock throttling", scope, NA, note="NVML cannot read clock event reasons here")
    status, found = OK, []
    for when, bits in (("idle", idle), ("under load", load)):
        if bits is None:
            continue
        for bit, (name, severity) in THROTTLE_BITS.items():
            if bits & bit:
                status = worst([status, severity])
                found.append(f"{name} {when}")
    if idle is not None and idle & POWER_CAP_BIT:
        status = worst([status, WARN])
        found.append("power cap reached while idle")
    measured = ", ".join(found) if found else ("none" + (" (idle and under load)" if load is not None else " (idle)"))
    note = "" if status == OK else "clocks are held down: throughput will be lower than this GPU gives elsewhere"
    return item("clock throttling", scope, status, measured, "none", note)


def judge_temperature(g: GpuFacts) -> CheckItem:
    scope = f"GPU {g.index}"
    if g.temp_c is None:
        return item("temperature", scope, NA, note="NVML cannot read the temperature here")
    slowdown = g.temp_slowdown_c or TEMP_SLOWDOWN_DEFAULT_C
    peak = g.load.temp_c_max if g.load is not None else None
    measured = f"{g.temp_c:.0f} C idle" + (f", {peak:.0f} C under load" if peak is not None else "")
    expected = f"well below the {slowdown:.0f} C slowdown" + ("" if g.temp_slowdown_c else " (assumed)")
    if g.temp_c >= slowdown - 5 or (peak is not None and peak >= slowdown):
        return item("temperature", scope, FAIL, measured, expected, "at the slowdown threshold: clocks will drop")
    if g.temp_c >= slowdown - 25 or (peak is not None and peak >= slowdown - 10):
        return item("temperature", scope, WARN, measured, expected, "hot for a short load: poor cooling or airflow")
    return item("temperature", scope, OK, measured, expected)


def judge_memory_health(g: GpuFacts) -> CheckItem:
    scope = f"GPU {g.index}"
    known = [g.ecc_enabled, g.ecc_uncorrected, g.retired_pending, g.remap_pending, g.remap_failed]
    if all(v is None for v in known):
        return item("ecc / retired pages", scope, NA, note="not supported on this GPU (GeForce cards have no ECC)")
    if g.ecc_uncorrected:
        return item("ecc / retired pages", scope, FAIL, f"{g.ecc_uncorrected} uncorrected ECC errors", "0",
                    "uncorrected memory errors since the driver loaded: the GPU may corrupt results or fall off")
    if g.remap_failed:
        return item("ecc / retired pages", scope, FAIL, "row remapping failed", "no failure",
                    "the GPU ran out of spare memory rows: it needs replacing")
    if g.remap_pending or g.retired_pending:
        return item("ecc / retired pages", scope, WARN, "retirement pending", "none pending",
                    "memory pages wait to be retired: the GPU needs a reset")
    ecc = {True: "ECC on", False: "ECC off", None: "ECC n/a"}[g.ecc_enabled]
    return item("ecc / retired pages", scope, OK, f"{ecc}, no uncorrected errors", "no uncorrected errors")


def judge_occupancy(g: GpuFacts) -> CheckItem:
    """Other processes and memory already used: a shared GPU measures the other tenant too."""
    scope = f"GPU {g.index}"
    if g.processes:
        names = ", ".join(
            f"{p.get('name') or 'pid'} ({p.get('pid')}"
            + (f", {p['mem_used'] / GIB:.1f} GiB" if p.get("mem_used") else "") + ")"
            for p in g.processes[:3]
        )
        more = f" and {len(g.processes) - 3} more" if len(g.processes) > 3 else ""
        return item("other processes", scope, FAIL, names + more, "none",
                    "another process is on this GPU: it shares compute and memory with the run")
    if g.mem_used is None or not g.mem_total:
        return item("other processes", scope, OK, "none seen", "none", "memory in use could not be read")
    share = g.mem_used / g.mem_total
    measured = f"none seen, {g.mem_used / GIB:.1f} of {g.mem_total / GIB:.0f} GiB used"
    if g.util_gpu is not None and g.util_gpu >= 10:
        measured += f", {g.util_gpu:.0f} % busy"
    if share >= MEM_USED_FAIL:
        return item("other processes", scope, FAIL, measured, "memory free",
                    "memory is held by a process NVML cannot show (another container?)")
    if share >= MEM_USED_WARN or (g.util_gpu is not None and g.util_gpu >= 10):
        return item("other processes", scope, WARN, measured, "idle, memory free",
                    "the GPU is in use by something NVML cannot show (another container?)")
    return item("other processes", scope, OK, measured, "none")


def judge_mig(g: GpuFacts) -> CheckItem | None:
    if not g.mig:
        return None
    return item("mig", f"GPU {g.index}", WARN, "MIG on", "MIG off",
                "the GPU is split into instances: one instance is not the GPU that was listed")


def judge_h2d(g: GpuFacts, measured: float | None, why: str | None = None) -> CheckItem:
    scope = f"GPU {g.index}"
    gen, width = _link_now(g)
    if g.load is None:  # the negotiated link under load is the fair base; idle would understate it
        gen, width = g.pcie_gen_max or gen, g.pcie_width_max or width
    expected = pcie_practical_gbps(gen, width)
    if measured is None:
        return item("host-to-device bandwidth", scope, NA, expected=_gb(expected), note=why or "not measured")
    if expected is None:
        return item("host-to-device bandwidth", scope, OK, _gb(measured), "n/a", "the link's generation is unknown")
    status = _ratio_status(measured, expected, H2D_OK, H2D_WARN)
    note = "" if status == OK else f"{measured / expected * 100:.0f} % of what PCIe Gen{gen} x{width} gives: a shared or degraded path"
    return item("host-to-device bandwidth", scope, status, _gb(measured), f"{_gb(expected)} (PCIe Gen{gen} x{width})", note)


def judge_gpu(g: GpuFacts, h2d: float | None, why: str | None = None) -> list[CheckItem]:
    items = [judge_pcie(g), judge_power(g), judge_throttle(g), judge_temperature(g), judge_memory_health(g),
             judge_occupancy(g), judge_h2d(g, h2d, why)]
    mig = judge_mig(g)
    return items + ([mig] if mig else [])


# --------------------------------------------------------------------------- between GPUs


def _pair_name(p: PairFacts) -> str:
    return f"{p.a}-{p.b}"


def judge_p2p(pairs: list[PairFacts]) -> CheckItem:
    if not pairs:
        return item("p2p", "all GPUs", NA, note="one GPU: nothing to connect")
    over_pcie = [p for p in pairs if p.nvlink_count == 0]
    off = [p for p in over_pcie if p.p2p is False]
    unknown = [p for p in over_pcie if p.p2p is None]
    nvlinked = len(pairs) - len(over_pcie)
    measured = f"P2P between {len(pairs) - len(off) - len(unknown)} of {len(pairs)} pairs"
    if nvlinked:
        measured += f" ({nvlinked} over NVLink)"
    if off:
        why = sorted({p.p2p_status or "not supported" for p in off})
        return item("p2p", "all GPUs", WARN, measured + f"; off: {', '.join(_pair_name(p) for p in off)}",
                    f"all {len(pairs)} pairs", f"NVML says {', '.join(why)}: NCCL goes through host memory, "
                    "multi-GPU training scales worse")
    if unknown:
        return item("p2p", "all GPUs", NA, measured, f"all {len(pairs)} pairs", "NVML could not tell for some pairs")
    return item("p2p", "all GPUs", OK, measured, f"all {len(pairs)} pairs")


def judge_nvlink(gpus: list[GpuFacts]) -> CheckItem | None:
    """Links up on GPUs of one model should match: fewer on one means a link is down."""
    if len(gpus) < 2 or not any(g.nvlink_links_up for g in gpus):
        return None
    by_model: dict[str | None, list[GpuFacts]] = {}
    for g in gpus:
        by_model.setdefault(g.name, []).append(g)
    short = []
    for same in by_model.values():
        most = max(g.nvlink_links_up for g in same)
        short += [g for g in same if g.nvlink_links_up < most]
    most = max(g.nvlink_links_up for g in gpus)
    if short:
        which = ", ".join(f"GPU {g.index}: {g.nvlink_links_up}" for g in short)
        return item("nvlink links", "all GPUs", WARN, f"links up {which}", f"{most} on every GPU",
                    "an NVLink link is down on a GPU that has them: traffic over it is slower")
    return item("nvlink links", "all GPUs", OK, f"{most} up on every GPU", f"{most} on every GPU")


def pair_expected_gbps(pair: PairFacts, gpus: dict[int, GpuFacts]) -> tuple[float | None, str]:
    """What a copy between the two should reach, and the link it goes over."""
    a, b = gpus.get(pair.a), gpus.get(pair.b)
    if a is None or b is None:
        return None, "unknown"
    if pair.nvlink_count > 0:
        value = nvlink_practical_gbps(a.name, pair.nvlink_count)
        return value, f"NVLink x{pair.nvlink_count}"
    links = []
    for g in (a, b):
        gen, width = _link_now(g) if g.load is not None else (g.pcie_gen_max or g.pcie_gen, g.pcie_width_max or g.pcie_width)
        links.append((pcie_practical_gbps(gen, width), f"PCIe Gen{gen} x{width}"))
    slowest = min(links, key=lambda x: x[0] if x[0] is not None else float("inf"))
    if slowest[0] is None:
        return None, "PCIe"
    if pair.p2p is False:
        return slowest[0] * NO_P2P_FACTOR, f"{slowest[1]} without P2P (via host memory)"
    return slowest[0], f"{slowest[1]} with P2P"


def judge_d2d(pairs: list[PairFacts], gpus: list[GpuFacts], facts_note: str | None = None) -> CheckItem | None:
    if not pairs:
        return None
    by_index = {g.index: g for g in gpus}
    rated = []
    for p in pairs:
        expected, link = pair_expected_gbps(p, by_index)
        if p.d2d_gbps is not None and expected:
            rated.append((p.d2d_gbps / expected, p, expected, link))
    if not rated:
        return item("device-to-device bandwidth", "all GPUs", NA, note=facts_note or "not measured")
    ratio, p, expected, link = min(rated, key=lambda r: r[0])
    status = _ratio_status(p.d2d_gbps or 0.0, expected, D2D_OK, D2D_WARN)
    measured = f"slowest pair {p.a}->{p.b}: {_gb(p.d2d_gbps)}" if len(rated) > 1 else f"{p.a}->{p.b}: {_gb(p.d2d_gbps)}"
    note = "" if status == OK else f"{ratio * 100:.0f} % of what {link} gives"
    return item("device-to-device bandwidth", "all GPUs", status, measured, f"{_gb(expected)} ({link})", note)


def judge_allreduce(facts: BoxFacts) -> CheckItem | None:
    if len(facts.gpus) < 2:
        return None
    if facts.allreduce_skipped:
        return item("all-reduce busbw", f"{len(facts.gpus)} GPUs", NA, note=facts.allreduce_skipped)
    by_index = {g.index: g for g in facts.gpus}
    links = [pair_expected_gbps(p, by_index) for p in facts.pairs]
    known = [(gbps, name) for gbps, name in links if gbps is not None]
    expected, link = min(known, key=lambda x: x[0]) if known else (None, "unknown")  # a ring runs at its slowest hop
    if facts.allreduce_busbw_gbps is None:
        return item("all-reduce busbw", f"{len(facts.gpus)} GPUs", NA, expected=_gb(expected),
                    note=facts.allreduce_error or "not measured")
    measured = _gb(facts.allreduce_busbw_gbps)
    if facts.allreduce_bytes:
        measured += f" at {facts.allreduce_bytes / (1 << 20):.0f} MiB"
    if expected is None:
        return item("all-reduce busbw", f"{len(facts.gpus)} GPUs", OK, measured, "n/a", "the link is unknown")
    status = _ratio_status(facts.allreduce_busbw_gbps, expected, ALLREDUCE_OK, ALLREDUCE_WARN)
    note = "" if status == OK else f"{facts.allreduce_busbw_gbps / expected * 100:.0f} % of what {link} gives"
    return item("all-reduce busbw", f"{len(facts.gpus)} GPUs", status, measured, f"{_gb(expected)} ({link})", note)


# --------------------------------------------------------------------------- host


def judge_host(host: HostFacts, gpu_count: int, vram_total: int | None) -> list[CheckItem]:
    items = []
    per = max(gpu_count, 1)
    what = "per GPU" if gpu_count else "(no GPU)"
    if host.cpu_cores is None:
        items.append(item("cpu cores", "host", NA))
    else:
        cores = host.cpu_cores / per
        status = OK if cores >= CORES_PER_GPU_OK else (WARN if cores >= CORES_PER_GPU_WARN else FAIL)
        online = f" of {host.cpu_cores_online} online" if host.cpu_cores_online and host.cpu_cores_online != host.cpu_cores else ""
        items.append(item("cpu cores", "host", status, f"{host.cpu_cores}{online} usable = {cores:g} {what}",
                          f">= {CORES_PER_GPU_OK} {what}",
                          "" if status == OK else "the server's front end and the load generator share these cores"))
    if host.ram_bytes is None:
        items.append(item("ram", "host", NA))
    elif gpu_count and vram_total:
        per_gpu = host.ram_bytes / gpu_count
        status = OK if host.ram_bytes >= vram_total else (WARN if per_gpu >= RAM_PER_GPU_FAIL_GIB * GIB else FAIL)
        items.append(item("ram", "host", status, f"{_gib(host.ram_bytes)} = {_gib(per_gpu)} per GPU",
                          f">= {_gib(vram_total)} (the GPUs' memory together)",
                          "" if status == OK else "less RAM than GPU memory: loading models and pinned buffers compete"))
    else:
        status = OK if host.ram_bytes >= 8 * GIB else WARN
        items.append(item("ram", "host", status, _gib(host.ram_bytes), ">= 8 GiB"))
    if host.disk_free_bytes is None:
        items.append(item("disk free", "host", NA, note=f"cannot read {host.disk_path}"))
    else:
        free = host.disk_free_bytes
        status = OK if free >= DISK_OK_GIB * GIB else (WARN if free >= DISK_WARN_GIB * GIB else FAIL)
        items.append(item("disk free", "host", status, f"{free / GIB:.1f} GiB at {host.disk_path}",
                          f">= {DISK_OK_GIB} GiB", "" if status == OK else "recordings and server logs need room"))
    if gpu_count:
        found = host.mps_control is not None
        items.append(item("mps", "host", OK if found else WARN, host.mps_control or "nvidia-cuda-mps-control not found",
                          "nvidia-cuda-mps-control on PATH", "" if found else MPS_MISSING))
    return items + judge_contention(host)


def judge_contention(host: HostFacts) -> list[CheckItem]:
    """Others on the box: their CPU, the hypervisor's steal, the load average against the
    usable cores, memory pressure. A warning, never a fail: the run goes on, and its levels
    say where contention shaped them (LevelResult's "contended")."""
    items = []
    if host.others_cpu is not None:  # None: no /proc/stat here
        busy = host.others_cpu > OTHERS_CPU_WARN
        top = f": {', '.join(host.others_top[:3])}" if host.others_top else ""  # the facts list them all
        items.append(item("contention", "host", WARN if busy else OK,  # read after its scope: "host contention"
                          f"{host.others_cpu * 100:.0f} % of the usable cores taken by other processes{top}",
                          f"< {OTHERS_CPU_WARN * 100:.0f} %",
                          CONTENDED_NOTE if busy else ""))
    if host.steal is not None:
        stolen = host.steal > STEAL_WARN
        items.append(item("cpu steal", "host", WARN if stolen else OK, f"{host.steal * 100:.1f} %",
                          f"< {STEAL_WARN * 100:.0f} %",
                          "the hypervisor gives these vCPUs' time to other guests" if stolen else ""))
    if host.load_average is not None and host.cpu_cores:
        per_core = host.load_average / host.cpu_cores
        items.append(item("load average", "host", WARN if per_core > LOAD_PER_CORE_WARN else OK,
                          f"{host.load_average:.2f} on {host.cpu_cores} usable cores",
                          f"<= {LOAD_PER_CORE_WARN * host.cpu_cores:.2g} (1-minute, before the run)",
                          CONTENDED_NOTE if per_core > LOAD_PER_CORE_WARN else ""))
    if host.memory_pressure is not None:
        pressed = host.memory_pressure > MEMORY_PRESSURE_WARN
        items.append(item("memory pressure", "host", WARN if pressed else OK,
                          f"{host.memory_pressure:.1f} % of the last 10 s waiting for memory (PSI)",
                          f"< {MEMORY_PRESSURE_WARN:g} %", "the box is short of memory: tasks stall" if pressed else ""))
    return items


# --------------------------------------------------------------------------- the profile


def _norm(text: str) -> str:
    return "".join(ch for ch in text.upper() if ch.isalnum())


def _listed(gb: float) -> str:
    """A listing's memory figure, read as GiB ("80 GB" cards hold 80 GiB): one unit beside the
    measured GiB, and the listing's own words after it."""
    return f"{gb:g} GiB (listed as {gb:g} GB)"


def judge_profile(exp: ExpectedHardware, facts: BoxFacts) -> list[CheckItem]:
    scope = f"profile {exp.profile}".strip()
    gpus = facts.gpus
    declared = exp.gpu_count > 0 or _norm(exp.gpu_model) not in ("", "NONE")
    if not declared:
        return [item("hardware block", scope, NA, note="the profile declares no hardware: nothing to compare")]
    items = []
    if exp.gpu_count:
        found = len(gpus)  # those CUDA_VISIBLE_DEVICES leaves: the run uses no other
        narrowed = facts.cuda_visible is not None and facts.machine_gpus != found
        status = OK if found == exp.gpu_count else (FAIL if found < exp.gpu_count else WARN)
        note = {FAIL: "fewer GPUs than the listing", WARN: "more GPUs than the profile uses"}.get(status, "")
        if narrowed and note:
            note = note.replace("GPUs", "visible GPUs", 1) + " (CUDA_VISIBLE_DEVICES)"
        measured = f"{found} visible of {facts.machine_gpus}" if narrowed else str(found)
        items.append(item("gpu count", scope, status, measured, str(exp.gpu_count), note))
    if _norm(exp.gpu_model) not in ("", "NONE"):
        names = sorted({g.name or "unknown" for g in gpus})
        match = bool(gpus) and all(_norm(exp.gpu_model) in _norm(g.name or "") for g in gpus)
        items.append(item("gpu model", scope, OK if match else FAIL, " / ".join(names) or "no GPU", exp.gpu_model,
                          "" if match else "not the GPU the profile (the listing) names"))
    if exp.vram_gb and gpus:
        smallest = min((g.mem_total for g in gpus if g.mem_total), default=None)
        if smallest is None:
            items.append(item("vram", scope, NA, expected=_listed(exp.vram_gb)))
        else:
            ratio = smallest / GIB / exp.vram_gb  # listings say "80 GB" for 80 GiB cards
            status = OK if ratio >= 0.95 else (WARN if ratio >= 0.9 else FAIL)
            items.append(item("vram", scope, status, f"{smallest / GIB:.1f} GiB", _listed(exp.vram_gb),
                              "" if status == OK else "less memory per GPU than the listing"))
    items += _judge_interconnect(exp, facts, scope)
    if exp.vcpus and facts.host.cpu_cores is not None:
        cores = facts.host.cpu_cores
        status = OK if cores >= exp.vcpus else (WARN if cores >= exp.vcpus / 2 else FAIL)
        items.append(item("vcpus", scope, status, str(cores), str(exp.vcpus),
                          "" if status == OK else "fewer usable cores than the listing (a CPU quota?)"))
    if exp.ram_gb and facts.host.ram_bytes is not None:
        ratio = facts.host.ram_bytes / GIB / exp.ram_gb
        status = OK if ratio >= 0.9 else (WARN if ratio >= 0.5 else FAIL)
        items.append(item("ram", scope, status, _gib(facts.host.ram_bytes), _listed(exp.ram_gb),
                          "" if status == OK else "less RAM than the listing (a memory limit?)"))
    return items


def _judge_interconnect(exp: ExpectedHardware, facts: BoxFacts, scope: str) -> list[CheckItem]:
    kind = exp.interconnect
    if kind == "none" or not facts.gpus:
        return []
    if kind in ("nvlink", "sxm"):
        if len(facts.gpus) < 2:
            return [item("interconnect", scope, NA, "one GPU", kind, "one GPU: nothing to connect")]
        linked = sum(1 for p in facts.pairs if p.nvlink_count > 0)
        status = OK if facts.pairs and linked == len(facts.pairs) else FAIL
        return [item("interconnect", scope, status, f"NVLink between {linked} of {len(facts.pairs)} pairs",
                     f"{kind}: NVLink between every pair",
                     "" if status == OK else "the listing promises NVLink: GPU-to-GPU traffic goes over PCIe")]
    want = int(kind.removeprefix("pcie_gen"))
    gens = []
    for g in facts.gpus:
        gen, _ = _link_now(g) if g.load is not None else (g.pcie_gen_max, None)
        gens.append(gen)
    if None in gens:
        return [item("interconnect", scope, NA, expected=f"PCIe Gen{want}", note="NVML cannot read the PCIe link")]
    low = min(g for g in gens if g is not None)
    status = OK if low >= want else FAIL
    return [item("interconnect", scope, status, f"PCIe Gen{low}" + ("" if len(set(gens)) == 1 else " (slowest GPU)"),
                 f"PCIe Gen{want}", "" if status == OK else "an older PCIe generation than the listing")]


# --------------------------------------------------------------------------- all of it


def judge_visible(facts: BoxFacts) -> CheckItem | None:
    """A CUDA_VISIBLE_DEVICES entry that names no GPU here: CUDA hides it and those after it."""
    if facts.visible_unknown is None:
        return None
    kept = ", ".join(str(g.index) for g in facts.gpus) or "none"
    return item("cuda_visible_devices", "all GPUs", WARN,
                f"{facts.visible_unknown!r} names no GPU of the {facts.machine_gpus} here, or one named before",
                f"an index below {facts.machine_gpus} or a GPU-... UUID",
                f"CUDA leaves out that entry and every one after it: GPUs checked: {kept}")


def judge(facts: BoxFacts) -> list[CheckItem]:
    visible = judge_visible(facts)
    items: list[CheckItem] = [visible] if visible else []
    for g in facts.gpus:
        items += judge_gpu(g, facts.h2d_gbps.get(g.index), facts.measure_error)
    extras: list[Callable[[], CheckItem | None]] = [
        lambda: judge_p2p(facts.pairs) if len(facts.gpus) > 1 else None,
        lambda: judge_nvlink(facts.gpus),
        lambda: judge_d2d(facts.pairs, facts.gpus, facts.measure_error),
        lambda: judge_allreduce(facts),
    ]
    items += [x for x in (f() for f in extras) if x is not None]
    vram = sum(g.mem_total or 0 for g in facts.gpus) or None
    items += judge_host(facts.host, len(facts.gpus), vram)
    items += judge_profile(facts.expected, facts)
    return items


def overall(items: list[CheckItem], gpu_count: int, nvml_error: str | None = None) -> tuple[Verdict, str]:
    """("go" | "warn" | "no-go", the one line)."""
    fails = [i for i in items if i.status == FAIL]
    warns = [i for i in items if i.status == WARN]
    oks = sum(1 for i in items if i.status == OK)
    head = "" if gpu_count else f"no GPU ({nvml_error or 'NVML found none'}): host checked only; "

    def brief(i: CheckItem) -> str:
        return f"{i.scope} {i.name}: {i.measured or 'n/a'}" + (f" (expected {i.expected})" if i.expected else "")

    if fails:
        listed = "; ".join(brief(i) for i in fails[:3]) + (" ..." if len(fails) > 3 else "")
        return "no-go", f"NO-GO: {head}{len(fails)} fail, {len(warns)} warn, {oks} ok: {listed}"
    if warns:
        listed = "; ".join(brief(i) for i in warns[:3]) + (" ..." if len(warns) > 3 else "")
        return "warn", f"GO, with warnings: {head}{len(warns)} warn, {oks} ok: {listed}"
    return "go", f"GO: {head}{oks} checks ok"
