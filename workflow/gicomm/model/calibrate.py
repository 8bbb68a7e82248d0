"""Calibration: parameters from the paper's single-op and ceiling numbers, or from a campaign.

``from_paper`` uses only ``paper.CALIBRATE`` (never ``paper.VALIDATE``). ``from_records`` fits what
a campaign's tidy table (results/<campaign>/tidy/records.csv) supports and falls back to the paper
for the rest; every parameter's ``sources`` entry says which records (or paper number) set it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from gicomm.columns import param_column
from gicomm.model.paper import CALIBRATE, value
from gicomm.model.parameters import ModelParams, NicParams, PathParams

SM_CLOCK_MHZ = {"P-IB": 1980.0, "P-H100": 1980.0, "P-RoCE": 1965.0, "P-GB200": 1965.0}
FETCH_MAX = 16
BURST_MAX = 32
COOP_BATCH = 32  # WQEs per doorbell of the per-QP ceiling row (Table 5, cooperative warps)
CACHE_WAYS = 8
WRITES_PER_VISIT_F10 = 32  # Fig 10a writes per visit
NIC_BOUND_SHARE = 0.8  # rates above this share of the one-QP NIC ceiling do not fit GPU costs


def _src(key: str) -> str:
    n = CALIBRATE[key]
    return f"paper {key} = {n.value} {n.unit} ({n.source})"


def clock_share() -> float:
    """Clock-sensitive share of GPU issue at the top locked clock (Table 6 GDAKI: C/f / (C/f+B))."""
    c_us = value("gdaki.issue_C") / 1845.0
    return c_us / (c_us + value("gdaki.issue_B"))


def split_clock(ns: float, sm_clock_mhz: float, share: float) -> tuple[float, float]:
    """(cycles, constant ns) with ``share`` of ``ns`` clock-sensitive at ``sm_clock_mhz``."""
    return share * ns * sm_clock_mhz / 1e3, (1.0 - share) * ns


def linear_batch_fit(batches: np.ndarray, ns_per_batch: np.ndarray) -> tuple[float, float]:
    """Least-squares ``t(b) = fixed + b * per``; returns (fixed, per)."""
    a = np.vstack([np.ones_like(batches, dtype=float), batches.astype(float)]).T
    (fixed, per), *_ = np.linalg.lstsq(a, ns_per_batch.astype(float), rcond=None)
    return float(fixed), float(per)


def nic_from_ceilings(
    ceiling_mmsg: float, per_qp_mmsg: float, n_pu: int | None = None
) -> tuple[NicParams, str]:
    """Units and per-WQE time from the NIC ceiling and the one-QP ceiling.

    Assumption A1: a WQE fetch (DMA read, up to ``FETCH_MAX`` WQEs) costs one WQE's unit time.
    One queue is served by one unit, so the one-QP ceiling at ``COOP_BATCH`` WQEs per doorbell
    fixes the unit time; the NIC ceiling at full fetches fixes the number of units.
    """
    fetches = -(-COOP_BATCH // FETCH_MAX)
    t_unit = COOP_BATCH / ((fetches + COOP_BATCH) * per_qp_mmsg) * 1e3
    if n_pu is None:
        n_pu = max(1, round(ceiling_mmsg * (1 + 1 / FETCH_MAX) * t_unit / 1e3))
    t = n_pu / ((1 + 1 / FETCH_MAX) * ceiling_mmsg) * 1e3
    nic = NicParams(n_pu=n_pu, t_fetch_ns=t, t_wqe_ns=t, fetch_max=FETCH_MAX, burst_max=BURST_MAX)
    how = f"n_pu = round(ceiling*(1+1/{FETCH_MAX})*t_unit) with t_unit from the one-QP ceiling"
    return nic, how


def _latency_src(key: str) -> str:
    """The sources of a path's issue, completion and round-trip latencies (paper keys ``key.*``)."""
    return "; ".join(_src(f"{key}.{part}") for part in ("issue", "completion", "rtt"))


def _gpu_path(
    name: str,
    key: str,
    build_ns: float,
    ring_ns: float,
    queue_depth: int,
    sm_clock_mhz: float,
    share: float,
) -> PathParams:
    """A GPU-initiated path: its build and ring times split into cycles and constant ns, its
    latencies from the paper's ``key.issue``, ``key.completion`` and ``key.rtt``."""
    bc, bn = split_clock(build_ns, sm_clock_mhz, share)
    rc, rn = split_clock(ring_ns, sm_clock_mhz, share)
    return PathParams(
        name=name,
        kind="gpu",
        build_cycles=bc,
        build_ns=bn,
        ring_cycles=rc,
        ring_ns=rn,
        issue_ns=value(f"{key}.issue") * 1e3,
        completion_ns=value(f"{key}.completion") * 1e3,
        rtt_ns=value(f"{key}.rtt") * 1e3,
        queue_depth=queue_depth,
    )


def _paper_paths(sm_clock_mhz: float, src: dict[str, str]) -> dict[str, PathParams]:
    share = clock_share()
    src["clock_share"] = f"{share:.3f} from " + _src("gdaki.issue_C") + "; " + _src("gdaki.issue_B")
    # mini-gda: one thread, one QP; t(b) = ring + b * build from the b=1 and b=16 rates
    b1 = 1e3 / value("minigda.rate_1thr_b1")
    b16 = 16e3 / value("minigda.rate_1thr_b16")
    build = (b16 - b1) / 15.0
    ring = b1 - build
    mg = _gpu_path("mini-gda", "minigda", build, ring, 1024, sm_clock_mhz, share)
    for f in ("build", "ring"):
        src[f"paths.mini-gda.{f}"] = (
            "t(b)=ring+b*build through "
            + _src("minigda.rate_1thr_b1")
            + "; "
            + _src("minigda.rate_1thr_b16")
        )
    src["paths.mini-gda.latency"] = _latency_src("minigda")
    src["paths.mini-gda.queue_depth"] = "assumption: 1024-entry send queue"
    # GDAKI: 1 thread per context = build + ring; 8 threads saturate the context lock = ring
    per1 = 1e3 / value("gdaki.rate_1thr")
    ring_g = 1e3 / value("gdaki.rate_8thr")
    gd = _gpu_path("gdaki", "gdaki", per1 - ring_g, ring_g, 128, sm_clock_mhz, share)
    src["paths.gdaki.build"] = _src("gdaki.rate_1thr") + " minus ring"
    src["paths.gdaki.ring"] = _src("gdaki.rate_8thr") + " (lock-bound)"
    src["paths.gdaki.latency"] = _latency_src("gdaki")
    src["paths.gdaki.queue_depth"] = "NCCL_GIN_GDAKI_QP_DEPTH default 128 (NCCL 2.28 GIN GDAKI)"
    # mini-proxy (tuned): enqueue is one posted 16 B store; workers fit per clock state
    t0: dict[str, float] = {}
    tper: dict[str, float] = {}
    for state in ("cold", "warm"):
        fixed, per = linear_batch_fit(
            np.array([1, 16]),
            np.array(
                [1e3 / value(f"miniproxy.{state}_b1"), 16e3 / value(f"miniproxy.{state}_b16")]
            ),
        )
        t0[state], tper[state] = fixed, per
        src[f"paths.mini-proxy.worker.{state}"] = (
            "t(B)=t0+B*tper through "
            + _src(f"miniproxy.{state}_b1")
            + "; "
            + _src(f"miniproxy.{state}_b16")
        )
    mp = PathParams(
        name="mini-proxy",
        kind="proxy",
        build_cycles=0.0,
        build_ns=value("miniproxy.issue") * 1e3,
        issue_ns=value("miniproxy.issue") * 1e3,
        completion_ns=value("miniproxy.completion") * 1e3,
        rtt_ns=value("miniproxy.rtt") * 1e3,
        queue_depth=4096,
        worker_t0_ns=t0,
        worker_tper_ns=tper,
        worker_bmax=16,
        worker_qp_depth=4096,
        shared_enqueue_ns=value("miniproxy.issue_mp") * 1e3,
    )
    src["paths.mini-proxy.shared_enqueue_ns"] = (
        _src("miniproxy.issue_mp")
        + " (multi-producer ring: atomic reservation, host progress read)"
    )
    src["paths.mini-proxy.build"] = _src("miniproxy.issue") + " (tuned enqueue, one posted store)"
    src["paths.mini-proxy.latency"] = _latency_src("miniproxy")
    src["paths.mini-proxy.queue_depth"] = "assumption: 4096-descriptor rings (64 KiB)"
    return {"mini-gda": mg, "gdaki": gd, "mini-proxy": mp}


def from_paper(platform: str = "P-IB") -> ModelParams:
    """Parameters from the paper's single-op, one-thread and ceiling numbers only.

    ``P-IB``: the GPU-initiated paths and the NIC of Tables 3, 5 and 10. ``P-H100``: the same paths
    with Fig. 10a's send ceiling. Both take the receive cost, context-cache size and miss cost from
    Fig. 10 (the same ConnectX-7 NIC).
    """
    src: dict[str, str] = {}
    f = SM_CLOCK_MHZ.get(platform, 1980.0)
    src["sm_clock_mhz"] = "assumption: top boost clock of the platform's GPU"
    paths = _paper_paths(f, src)
    if platform == "P-H100":
        ceiling = value("nic.ceiling_ph100_send")
        ckey = "nic.ceiling_ph100_send"
    else:
        ceiling = value("nic.ceiling_pib")
        ckey = "nic.ceiling_pib"
    nic, how = nic_from_ceilings(ceiling, value("nic.per_qp_ceiling"))
    src["nic.n_pu"] = how + "; " + _src(ckey) + "; " + _src("nic.per_qp_ceiling")
    src["nic.t_wqe_ns"] = src["nic.t_fetch_ns"] = "A1: t_fetch = t_wqe; " + _src(ckey)
    nic.cache_ways = CACHE_WAYS
    nic.cache_sets = max(1, round(value("conn.onset") / CACHE_WAYS))
    src["nic.cache_sets"] = f"capacity = onset, {CACHE_WAYS} ways; " + _src("conn.onset")
    # the same ConnectX-7 on every platform of the paper: Fig. 10 gives receive and miss costs
    # receive work: send+recv at few connections vs send-only, per unit
    extra_rx = 1e3 / value("conn.sendrecv_low") - 1e3 / value("nic.ceiling_ph100_send")
    nic.t_rx_ns = nic.n_pu * extra_rx
    src["nic.t_rx_ns"] = _src("conn.sendrecv_low") + " vs " + _src("nic.ceiling_ph100_send")
    # receive-side misses: at 32768 connections every receive burst of a visit misses
    extra_miss = 1e3 / value("conn.sendrecv_32768") - 1e3 / value("conn.sendrecv_low")
    nic.t_miss_rx_ns = nic.n_pu * WRITES_PER_VISIT_F10 * extra_miss
    src["nic.t_miss_rx_ns"] = (
        f"one miss per {WRITES_PER_VISIT_F10}-write receive burst at 32768 connections; "
        + _src("conn.sendrecv_32768")
    )
    nic.t_miss_tx_ns = 0.0
    src["nic.t_miss_tx_ns"] = "send-side contexts prefetched at doorbell time (Fig10a flat)"
    poll = (value("scope.allqp_32") - value("scope.allqp_1")) / 31.0 * 1e3
    src["poll_per_qp_ns"] = _src("scope.allqp_1") + "; " + _src("scope.allqp_32") + " (P-RoCE)"
    return ModelParams(
        platform=platform, sm_clock_mhz=f, nic=nic, paths=paths, poll_per_qp_ns=poll, sources=src
    )


# ----------------------------------------------------------------------------------------------
# from a campaign's tidy records


def _num(df: pd.DataFrame, col: str) -> pd.Series:
    return pd.to_numeric(df[col], errors="coerce") if col in df else pd.Series(np.nan, df.index)


def _describe(rows: pd.DataFrame) -> str:
    exps = ",".join(sorted(map(str, rows["experiment"].unique()))) if "experiment" in rows else "?"
    if "nic_backend" in rows:
        exps += " nic_backend=" + ",".join(sorted(map(str, rows["nic_backend"].unique())))
    pids = rows["point_id"].astype(str).tolist()[:4] if "point_id" in rows else []
    more = "..." if len(rows) > len(pids) else ""
    return f"records: experiment={exps} rows={len(rows)} point_id={','.join(pids)}{more}"


def _prefer(rows: pd.DataFrame) -> pd.DataFrame:
    """The records closest to the paper's setting: a real NIC over a software NIC, and the
    inline 8 B payload over others, where the records offer a choice."""
    if "nic_backend" in rows and (rows["nic_backend"] == "mlx5").any():
        rows = rows[rows["nic_backend"] == "mlx5"]
    if param_column("payload") in rows and (rows[param_column("payload")] == "inline").any():
        rows = rows[
            rows[param_column("payload")].isna() | (rows[param_column("payload")] == "inline")
        ]
    return rows


def _ok(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["status"] == "ok"] if "status" in df else df


def from_records(
    tidy: pd.DataFrame, base: ModelParams | None = None, transport_map: dict[str, str] | None = None
) -> ModelParams:
    """Fit what the records support; keep ``base`` (default: ``from_paper``) for the rest.

    Fitted, per path (records whose ``transport`` maps to the path name):
      * ``issue_ns`` / ``completion_ns`` / ``rtt_ns``: median p50 of one-thread points (for the
        proxy, tuned-enqueue points; the baseline enqueue's ``issue_ns`` sets the shared-ring
        enqueue cost);
      * GPU ``build``/``ring``: ``msg_rate`` at one thread and one QP against ``batch``
        (t(b) = ring + b*build), split by the clock share;
      * clock share: ``issue_ns`` against ``sm_clock_mhz`` (T = C/f + B), given several clocks;
      * proxy workers: ``msg_rate`` of one worker against ``batch`` per ``cpu_clock_state``
        (tuned-enqueue points, those with the most rings);
      * NIC ceiling: the largest ``msg_rate`` p50 of the campaign's GPU paths (rescales t_wqe).
    """
    p = ModelParams.from_dict((base or from_paper()).to_dict())
    tmap = {"mini-gda": "mini-gda", "mini-proxy": "mini-proxy", "nccl-gin-gdaki": "gdaki"}
    tmap.update(transport_map or {})
    df = _ok(tidy.copy())
    if df.empty or "transport" not in df:
        return p
    df["_path"] = df["transport"].map(tmap)
    df["_p50"] = _num(df, "p50")
    threads = _num(df, param_column("threads")).fillna(1)
    batch = _num(df, param_column("batch"))
    if batch.isna().all():
        batch = _num(df, param_column("wqes_per_doorbell"))
    qps = _num(df, param_column("qps")).fillna(1)
    workers = _num(df, param_column("workers")).fillna(1)
    for name, path in p.paths.items():
        mine = _prefer(df[df["_path"] == name])
        if mine.empty:
            continue
        one = _unloaded(mine[threads.loc[mine.index] == 1])
        if path.kind == "proxy" and param_column("enqueue") in one:
            # the baseline (multi-producer) enqueue is the shared-ring cost; the idle latencies
            # are the tuned path's (proxy_one_op sweeps both)
            base = one[(one[param_column("enqueue")] == "baseline") & (one["metric"] == "issue_ns")]
            if len(base):
                path.shared_enqueue_ns = float(base["_p50"].median())
                p.sources[f"paths.{name}.shared_enqueue_ns"] = _describe(base)
            one = one[
                one[param_column("enqueue")].isna() | (one[param_column("enqueue")] != "baseline")
            ]
        for metric, attr in (
            ("issue_ns", "issue_ns"),
            ("completion_ns", "completion_ns"),
            ("rtt_ns", "rtt_ns"),
        ):
            rows = one[one["metric"] == metric]
            if len(rows):
                setattr(path, attr, float(rows["_p50"].median()))
                p.sources[f"paths.{name}.{attr}"] = _describe(rows)
        rate = _eight_byte_rates(mine[(mine["metric"] == "msg_rate") & mine["_p50"].gt(0)])
        if path.kind == "gpu":
            rows = rate[(threads.loc[rate.index] == 1) & (qps.loc[rate.index] == 1)]
            rows = rows[batch.loc[rows.index].notna()]
            # points near the one-QP NIC ceiling say nothing about GPU costs: leave them out
            bq = batch.loc[rows.index].to_numpy(dtype=float)
            fetches = np.ceil(bq / p.nic.fetch_max)
            qp_ceiling = bq / (fetches * p.nic.t_fetch_ns + bq * p.nic.t_wqe_ns) * 1e3
            rows = rows[rows["_p50"].to_numpy() < NIC_BOUND_SHARE * qp_ceiling]
            if batch.loc[rows.index].nunique() >= 2:
                bb = batch.loc[rows.index].to_numpy()
                ring, build = linear_batch_fit(bb, bb / rows["_p50"].to_numpy() * 1e3)
                share = _fit_clock_share(mine) or clock_share()
                f = p.sm_clock_mhz
                clocks = _num(rows, "sm_clock_mhz").dropna()
                if len(clocks):
                    f = float(clocks.median())
                path.build_cycles, path.build_ns = split_clock(max(build, 0.0), f, share)
                path.ring_cycles, path.ring_ns = split_clock(max(ring, 0.0), f, share)
                p.sources[f"paths.{name}.build"] = p.sources[f"paths.{name}.ring"] = (
                    "t(b)=ring+b*build fit, " + _describe(rows)
                )
        else:
            if (mine["transport"] == "mini-proxy").any():
                # gicomm's own mini-proxy: its workers reap their CQ once per pass
                path.worker_reap_per_pass = True
                p.sources[f"paths.{name}.worker_reap_per_pass"] = (
                    "records: transport mini-proxy, gicomm's WorkerPool, which publishes "
                    "completions after each pass over its rings (native/src/proxy/pool.cpp)"
                )
            rows = _worker_bound(rate[workers.loc[rate.index] == 1])
            state = rows.get("cpu_clock_state")
            for st in ("cold", "warm"):
                sel = rows if state is None else rows[state.fillna("cold") == st]
                sel = _most_rings(sel)
                bb = batch.loc[sel.index].dropna()
                if bb.nunique() >= 2:
                    sel = sel.loc[bb.index]
                    per_batch = bb.to_numpy() / sel["_p50"].to_numpy() * 1e3
                    t0, tper = linear_batch_fit(bb.to_numpy(), per_batch)
                    path.worker_t0_ns[st], path.worker_tper_ns[st] = max(t0, 0.0), max(tper, 0.0)
                    p.sources[f"paths.{name}.worker.{st}"] = "t(B)=t0+B*tper fit, " + _describe(sel)
    gpu_rates = df[(df["metric"] == "msg_rate") & df["_path"].isin(["mini-gda", "gdaki"])]
    if "nic_backend" in gpu_rates:
        gpu_rates = gpu_rates[gpu_rates["nic_backend"] == "mlx5"]
    if len(gpu_rates) >= 3:
        top = gpu_rates.loc[gpu_rates["_p50"].idxmax()]
        scale = p.nic.ceiling_mmsg() / float(top["_p50"])
        if scale < 1.0:  # a measured rate above the model's ceiling raises the ceiling
            p.nic.t_wqe_ns *= scale
            p.nic.t_fetch_ns *= scale
            p.sources["nic.t_wqe_ns"] = "NIC ceiling raised to the top rate, " + _describe(
                gpu_rates.loc[[top.name]]
            )
    return p


def _unloaded(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows measured with no background load: a loaded probe's latency is what the model
    predicts, not an idle latency to calibrate on."""
    background = pd.Series(0.0, rows.index)
    for col in (
        param_column("bulk_ctas"),
        param_column("bg_ctas"),
        param_column("background_ctas"),
    ):
        background = background.where(_num(rows, col).isna(), _num(rows, col))
    return rows[background.fillna(0) <= 0]


def _eight_byte_rates(rows: pd.DataFrame) -> pd.DataFrame:
    """Message-rate points of 8-byte messages from one producer block: the model's unit. A
    goodput sweep's large payloads, or several producer CTAs, say nothing about one thread's
    per-WQE cost (a 64 KiB point read as one thread's rate once gave a 21 us 'build' cost)."""
    size = _num(rows, param_column("size"))
    ctas = _num(rows, param_column("ctas")).fillna(_num(rows, param_column("blocks")))
    return rows[(size.isna() | (size <= 8)) & (ctas.isna() | (ctas <= 1))]


def _worker_bound(rows: pd.DataFrame) -> pd.DataFrame:
    """One worker's rate points that say something about the worker: the tuned enqueue only (a
    baseline enqueue's PCIe round trip per descriptor bounds the producer, not the worker)."""
    if param_column("enqueue") not in rows:
        return rows
    return rows[
        rows[param_column("enqueue")].isna() | (rows[param_column("enqueue")] != "baseline")
    ]


def _most_rings(rows: pd.DataFrame) -> pd.DataFrame:
    """The points with the most rings: with one producer per ring, fewer rings leave the worker
    waiting for its producers (one ring: 6.6 Mmsg/s at B=16 on H200x2, eight: 18.9)."""
    rings = _num(rows, param_column("rings"))
    if rings.isna().all():
        return rows
    return rows[rings == rings.max()]


def _fit_clock_share(rows: pd.DataFrame) -> float | None:
    """Clock-sensitive share at the top clock: ``issue_ns`` vs ``sm_clock_mhz`` (>= 3 clocks)."""
    sel = rows[rows["metric"] == "issue_ns"]
    f = _num(sel, "sm_clock_mhz")
    sel = sel[f.notna()]
    if f.loc[sel.index].nunique() < 3:
        return None
    inv = 1e3 / f.loc[sel.index].to_numpy()
    c, b = np.polyfit(inv, sel["_p50"].to_numpy(), 1)
    top = 1e3 / f.max()
    if c <= 0:
        return 0.0
    return float(c * top / (c * top + max(b, 0.0)))


# ----------------------------------------------------------------------------------------------
# the calibrated parameters as a table for the report


def _flat_params(p: ModelParams) -> dict[str, float]:
    out: dict[str, float] = {"sm_clock_mhz": p.sm_clock_mhz, "poll_per_qp_ns": p.poll_per_qp_ns}
    for k, v in p.nic.__dict__.items():
        out[f"nic.{k}"] = float(v)
    for name, path in p.paths.items():
        for k, v in path.__dict__.items():
            if isinstance(v, dict):
                for st, x in v.items():
                    out[f"paths.{name}.{k}.{st}"] = float(x)
            elif isinstance(v, int | float):
                out[f"paths.{name}.{k}"] = float(v)
    return out


def _source_for(key: str, sources: dict[str, str]) -> str:
    if key in sources:
        return sources[key]
    parts = key.split(".")
    cands = [
        s for s in sources if key.startswith(s + "_") or key.startswith(s + ".")
    ]  # e.g. paths.x.build -> paths.x.build_cycles
    if parts[0] == "paths" and len(parts) >= 4 and parts[2].startswith("worker_"):
        cands.append(f"paths.{parts[1]}.worker.{parts[3]}")
    if parts[0] == "paths" and parts[2] in ("issue_ns", "completion_ns", "rtt_ns"):
        cands += [f"paths.{parts[1]}.latency", f"paths.{parts[1]}.{parts[2]}"]
    for c in sorted(cands, key=len, reverse=True):
        if c in sources:
            return sources[c]
    return "default (see docs/model.md)"


def _origin(source: str) -> str:
    s = source.lower()
    if s.startswith("records") or "records:" in s:
        return "records"
    if s.startswith(("assumption", "a1", "default", "nccl_gin")):
        return "assumption"
    if s.startswith("platform config"):
        return "platform config"
    return "paper"


def calibration_table(p: ModelParams, reference: ModelParams | None = None) -> pd.DataFrame:
    """One row per parameter: value, the paper-only value, origin and source text."""
    ref = _flat_params(reference) if reference else {}
    rows = []
    for key, v in _flat_params(p).items():
        src = _source_for(key, p.sources)
        rows.append(
            {
                "platform": p.platform,
                "parameter": key,
                "value": v,
                "paper_value": ref.get(key, np.nan),
                "origin": _origin(src),
                "source": src,
            }
        )
    return pd.DataFrame(rows)
