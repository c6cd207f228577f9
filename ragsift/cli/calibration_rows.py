"""How ``ragsift calibrations list`` shows a stored calibration: what made it, its
bars, and whether queries use it (a table row and a JSON object)."""

from __future__ import annotations

from typing import Any

__all__ = ["bar_text", "keyword_bar", "made_by", "scope_row", "shown_name"]


def made_by(artifact: Any) -> str:
    """What made ``artifact``: its provenance's method, a feedback re-fit, or its fit set."""
    provenance = artifact.provenance
    if provenance is not None:
        return str(provenance.method)
    from ragsift.confidence.refit import refit_kind

    kind, labels = refit_kind(artifact), artifact.data.n_examples
    if kind == "feedback-raise":  # ADR 022
        return f"feedback: {labels} labels, all on answered results (the bar only raised)"
    if kind == "feedback-remap":
        return f"feedback: {labels} labels (re-mapped and re-certified)"
    return f"fit on {artifact.data.source}"


def scope_row(scope: Any, artifact: Any, reason: str | None, why: str | None) -> dict[str, Any]:
    """One scope as the query path finds it: in use, in use but uncertified, or not used."""
    provenance = artifact.provenance if artifact is not None else None
    uncertified = provenance.uncertified if provenance is not None else None
    if reason is not None:
        state = f"not used ({reason}): {why}"
    elif artifact is not None and not artifact.conformal.feasible:
        state = "in use, no answer threshold certified: every query is refused"
    elif uncertified is not None:
        state = f"in use, bar not certified here: {uncertified}"
    else:
        state = "in use"
    conformal = artifact.conformal if artifact is not None else None
    holes = provenance.missing_answers if provenance is not None else None
    return {
        "collection": scope.collection,
        "tenant": scope.tenant,
        "version": artifact.version if artifact is not None else None,
        "made_by": made_by(artifact) if artifact is not None else None,
        "base_version": provenance.base_version if provenance is not None else None,
        "answer_threshold": conformal.threshold
        if conformal is not None and conformal.feasible
        else None,
        "keyword_answer_threshold": keyword_bar(artifact),
        "used": reason is None,
        "ignored_reason": reason,
        "uncertified": uncertified,
        # Of questions on its subjects whose answer it lacks, the share answered (estimated).
        "missing_answer_share": round(holes.share, 4) if holes is not None else None,
        "missing_answer_asked": holes.asked if holes is not None else None,
        "state": state,
    }


def shown_name(name: str) -> str:
    """A stored name as text a terminal shows, not obeys (control characters escaped)."""
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in name)


def keyword_bar(artifact: Any) -> float | None:
    """The answer threshold keyword-only queries are held to (ADR 029); None without a
    keyword model or where it certified none."""
    part = artifact.keyword if artifact is not None else None
    if part is None or not part.conformal.feasible:
        return None
    return float(part.conformal.threshold)


def bar_text(row: dict[str, Any]) -> str:
    """A row's answer threshold (and keyword-only one) as the table shows it."""
    bar, keyword = row["answer_threshold"], row["keyword_answer_threshold"]
    shown = "none certified" if bar is None else f"{bar:.2f}"
    return shown if keyword is None else f"{shown} (keyword-only {keyword:.2f})"
