"""What a read did: which original column filled each canonical one, what was kept, what was skipped.

Every reader leaves a plain, JSON-able dict in ``RunLog.meta["read"]``; :class:`ReadReport` is its typed
view (``run.report``) and :meth:`ReadReport.explain` the text ``--explain`` prints.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

__all__ = ["ReadReport", "merge_read_dicts"]


def _short(names, limit: int = 12) -> str:
    names = list(names)
    s = ", ".join(names[:limit])
    return s + (f", ... ({len(names)} in all)" if len(names) > limit else "")


@dataclasses.dataclass(frozen=True)
class ReadReport:
    """How one run was read.

    Attributes:
        source: the file or folder read.
        format: the reader used (one of :data:`grpojax.logs.FORMATS`).
        run: the run's name.
        n_steps, first_step, last_step: the steps read.
        step_key: the column the steps came from (``None``: the reader's own, e.g. TensorBoard's).
        mapped: canonical column -> the original column(s) that filled it.
        user_mapped: the canonical columns the caller chose the source of (``mapping=`` / ``--map``).
        kept: the other columns, kept under their own names.
        skipped_columns: column -> why it was left out (text values, W&B min/max bounds, ...).
        skipped_rows: why -> ``{"count": n, "first_line": line or None}`` (lines that are not JSON,
            rows without a step or without a number, per-sample rows, ...).
        hyperparameters: facts about the run taken into its meta (``group_size``, ``lr``, ...) with
            the file they came from in ``hyperparameters_from``.
        notes: repairs and warnings (restarts, duplicates, NaN counts, averaged rows).
    """

    source: str
    format: str
    run: str
    n_steps: int = 0
    first_step: int | None = None
    last_step: int | None = None
    step_key: str | None = None
    mapped: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    user_mapped: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()
    skipped_columns: Mapping[str, str] = dataclasses.field(default_factory=dict)
    skipped_rows: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    hyperparameters: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    hyperparameters_from: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ReadReport":
        fields = {f.name for f in dataclasses.fields(cls)}
        kw = {k: v for k, v in d.items() if k in fields}
        for k in ("user_mapped", "kept", "notes", "hyperparameters_from"):
            if k in kw:
                kw[k] = tuple(kw[k] or ())
        return cls(**kw)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        for k in ("user_mapped", "kept", "notes", "hyperparameters_from"):
            d[k] = list(d[k])
        return d

    def explain(self) -> str:
        """Several lines: what was read, mapped, kept and skipped (what ``--explain`` prints)."""
        steps = "no steps" if not self.n_steps else f"{self.n_steps} steps ({self.first_step}..{self.last_step})"
        key = f", steps from {self.step_key!r}" if self.step_key else ""
        lines = [f"{self.source}: run {self.run!r} read as {self.format}{key}: {steps}"]
        if self.mapped:
            parts = []
            for canon, src in self.mapped.items():
                src_s = " + ".join(map(str, src)) if isinstance(src, (list, tuple)) else str(src)
                mark = " (your mapping)" if canon in self.user_mapped else ""
                parts.append(canon if src_s == canon else f"{canon} <- {src_s}{mark}")
            lines.append("  mapped: " + "; ".join(parts))
        else:
            lines.append("  mapped: nothing (no canonical column found)")
        if self.kept:
            lines.append(f"  kept under their own names ({len(self.kept)}): {_short(self.kept)}")
        if self.skipped_columns:
            by_why: dict[str, list[str]] = {}
            for col, why in self.skipped_columns.items():
                by_why.setdefault(why, []).append(col)
            lines.append("  skipped columns: " + "; ".join(f"{_short(cols, 8)} ({why})" for why, cols in by_why.items()))
        if self.skipped_rows:
            parts = []
            for why, info in self.skipped_rows.items():
                first = info.get("first_line")
                parts.append(f"{info.get('count', 0)} {why}" + (f" (first: line {first})" if first else ""))
            lines.append("  skipped rows: " + "; ".join(parts))
        if self.hyperparameters:
            src = f" from {', '.join(self.hyperparameters_from)}" if self.hyperparameters_from else ""
            lines.append(f"  run facts{src}: " + ", ".join(f"{k}={v}" for k, v in self.hyperparameters.items()))
        for n in self.notes:
            lines.append(f"  note: {n}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.explain()


def merge_read_dicts(reads: list[Mapping[str, Any]], *, source: str, run: str, format: str, steps) -> dict:
    """One read dict for a run joined from several reads (a resumed run's files, a train + eval file)."""
    out: dict[str, Any] = {"source": source, "format": format, "run": run, "mapped": {}, "user_mapped": [],
                           "kept": [], "skipped_columns": {}, "skipped_rows": {}, "hyperparameters": {},
                           "hyperparameters_from": [], "notes": []}
    for r in reads:
        for canon, src in (r.get("mapped") or {}).items():
            out["mapped"].setdefault(canon, src)
        for k in ("user_mapped", "kept", "hyperparameters_from", "notes"):
            for x in r.get(k) or ():
                if x not in out[k]:
                    out[k].append(x)
        out["skipped_columns"].update(r.get("skipped_columns") or {})
        for why, info in (r.get("skipped_rows") or {}).items():
            cur = out["skipped_rows"].setdefault(why, {"count": 0, "first_line": info.get("first_line")})
            cur["count"] += int(info.get("count", 0))
        out["hyperparameters"].update(r.get("hyperparameters") or {})
        if out.get("step_key") is None and r.get("step_key"):
            out["step_key"] = r["step_key"]
    out["kept"] = [k for k in out["kept"] if k not in out["mapped"]]
    out["n_steps"] = int(len(steps))
    out["first_step"] = int(steps[0]) if len(steps) else None
    out["last_step"] = int(steps[-1]) if len(steps) else None
    srcs = [r.get("source") for r in reads if r.get("source")]
    out["notes"].append(f"joined from {len(reads)} reads: {', '.join(srcs)}")
    return out
